/**
 * The `workflow_run` tool: the model starts an agent team on a goal and gets the run id at once;
 * the team's result comes back later as a `system` message in this session, as a subagent's does.
 * Chats can start teams without the model (`@TeamName goal`, ./triggers.ts); this is for when the
 * model decides a team should take the work.
 */
import { allowedTeams } from "./team-allowance.js";
import { z } from "zod";
import { ToolError } from "../../errors.js";
import { defineTool, type Tool } from "../../tools/tool.js";
import type { WorkflowEngine } from "./engine.js";
import { startedReply } from "./messages.js";
import type { TeamCatalog } from "./team-catalog.js";

const parameters = z.object({
  team: z.string().trim().min(1).max(64).describe("The team's name, as listed when you call this with a name no team has."),
  goal: z.string().trim().min(1).max(20_000).describe("What the team should achieve: complete and self-contained (the team sees nothing of this conversation)."),
});

/** `profile`: the agent profile whose agent offers the tool; its runs run as that profile. `teams`: the ones it may start (default all). */
export function createWorkflowRunTool(options: { catalog: Pick<TeamCatalog, "findByName" | "enabled">; engine: Pick<WorkflowEngine, "start">; profile?: string; teams?: readonly string[] }): Tool<typeof parameters> {
  const catalog = allowedTeams(options.catalog, options.teams);
  return defineTool({
    name: "workflow_run",
    description:
      "Start an agent team (several agents working together as a pipeline, a graph or a council) on a goal, in the background. " +
      "You get the run id at once; the team's result arrives later as a system message in this chat. Do not wait for it or poll it.",
    parameters,
    async execute(args, context) {
      const team = await catalog.findByName(args.team);
      if (!team || !team.enabled) {
        const names = (await catalog.enabled()).map((candidate) => candidate.name);
        throw new ToolError(`no enabled team is called "${args.team}"`, names.length > 0 ? `Use one of: ${names.join(", ")}.` : "No team is enabled; do the work yourself.");
      }
      const run = await options.engine.start({ team, goal: args.goal, sessionKey: context.sessionKey, origin: "tool", ...(context.person ? { person: context.person } : {}), ...(options.profile ? { profile: options.profile } : {}) });
      return startedReply(run);
    },
  });
}
