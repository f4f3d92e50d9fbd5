/**
 * The `memory` tool: the model reads, replaces, extends and searches the long-term memory of the
 * session it is serving. Which file that is (per chat or global) is the memory store's business.
 */
import { z } from "zod";
import type { MemoryStore } from "./memory.js";
import { ToolError } from "../errors.js";
import { defineTool, type Tool } from "../tools/tool.js";

const parameters = z.object({
  action: z
    .enum(["read", "write", "append", "search"])
    .describe('"read" the memory, "write" (replace all of it), "append" a dated note, or "search" it.'),
  content: z.string().optional().describe('For "write": the whole new memory. For "append": the note to add.'),
  query: z.string().optional().describe('For "search": text to look for, ignoring case.'),
});

/** Search results beyond this are counted, not listed, to keep the context small. */
const MAX_SEARCH_RESULTS = 50;

export function createMemoryTool(memory: MemoryStore): Tool<typeof parameters> {
  return defineTool({
    name: "memory",
    description:
      "Long-term memory that outlives this conversation's history (Markdown). Append lasting facts, preferences and " +
      "decisions as they come up; search it before saying you do not know something the user told you earlier; " +
      "write to replace it all, e.g. to condense it or fix a wrong fact.",
    parameters,
    async execute(args, context) {
      const shown = memory.location(context.sessionKey);

      switch (args.action) {
        case "read": {
          const content = await memory.read(context.sessionKey);
          if (content.trim() === "") return `Memory is empty (${shown}). Use action "append" to save something worth remembering.`;
          return content;
        }
        case "write": {
          const content = required(args.content, "content", "write", "Send the whole new memory text in `content`.");
          await memory.write(context.sessionKey, content);
          return `Saved the memory (${Buffer.byteLength(content, "utf8")} bytes) to ${shown}.`;
        }
        case "append": {
          const content = required(args.content, "content", "append", "Send the note to add in `content`.");
          await memory.append(context.sessionKey, content);
          return `Appended a dated note to ${shown}.`;
        }
        case "search": {
          const query = required(args.query, "query", "search", "Send the text to look for in `query`.");
          return formatMatches(query, await memory.search(context.sessionKey, query));
        }
      }
    },
  });
}

function required(value: string | undefined, name: string, action: string, hint: string): string {
  // An empty note or query is a mistake; an empty `write` could mean "clear it", so only that is allowed.
  const empty = value === undefined || (action !== "write" && value.trim() === "");
  if (empty) throw new ToolError(`\`${name}\` is required for action "${action}"`, hint);
  return value;
}

function formatMatches(query: string, matches: { file: string; line: number; text: string }[]): string {
  if (matches.length === 0) return `No memory lines contain "${query}". Try a shorter or different word.`;
  const listed = matches.slice(0, MAX_SEARCH_RESULTS).map((match) => `${match.file}:${match.line}: ${match.text}`);
  const more = matches.length - listed.length;
  if (more > 0) listed.push(`[${more} more matches not shown; search for something more specific]`);
  return listed.join("\n");
}
