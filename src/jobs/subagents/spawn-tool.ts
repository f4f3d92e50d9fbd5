/**
 * The `spawn` tool: hands long or independent work to a background subagent and returns at once.
 * The subagent's result comes back later as a `system` message in this same session, which the
 * agent then answers in the chat.
 */
import { z } from "zod";
import type { SubagentManager } from "./manager.js";
import { defineTool, type Tool } from "../../tools/tool.js";

const parameters = z.object({
  task: z.string().trim().min(1).max(20_000).describe("What the subagent should do: a complete, self-contained description (it sees nothing of this conversation)."),
  label: z.string().trim().min(1).max(100).optional().describe("A short name for the task, shown to the user. Default: the first 30 characters of the task."),
});

/** `profile`: the agent profile whose agent offers the tool; its subagents run as that profile. */
export function createSpawnTool(manager: Pick<SubagentManager, "create">, profile?: string): Tool<typeof parameters> {
  return defineTool({
    name: "spawn",
    description:
      "Start a background subagent for long or independent work (analysing many files, long builds, research across several pages). " +
      "It works on its own with file, shell and web tools and cannot ask you anything, so describe the task completely. " +
      "You get its ID at once; its result arrives later as a system message in this chat. Do not wait for it or poll it.",
    parameters,
    async execute(args, context) {
      const task = await manager.create(context.sessionKey, args.task, args.label, context.person, profile);
      return `Subagent [${task.label}] started (ID: ${task.id}). I'll tell you when it is done.`;
    },
  });
}
