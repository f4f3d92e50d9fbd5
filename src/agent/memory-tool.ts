/**
 * The `memory` tool: the model reads, replaces, extends and searches long-term memory. Two scopes:
 * - `chat` (default): the memory of the session it is serving (per chat or global: the memory
 *   store's business, as `memory.scope` says);
 * - `person`: the memory of one person speaking in this turn, which follows them into every chat
 *   with the bot. Only a person who speaks in the turn can be named, so no one can read or change
 *   another member's memory by asking for it.
 * Every answer names the scope and the place it read or wrote.
 */
import { z } from "zod";
import type { MemoryStore } from "../memory/memory.js";
import type { PersonMemory } from "../memory/person-memory.js";
import { ToolError } from "../errors.js";
import { type ToolContext, defineTool, type Tool } from "../tools/tool.js";

const parameters = z.object({
  action: z
    .enum(["read", "write", "append", "search"])
    .describe('"read" the memory, "write" (replace all of it), "append" a dated note, or "search" it.'),
  content: z.string().optional().describe('For "write": the whole new memory. For "append": the note to add.'),
  query: z.string().optional().describe('For "search": text to look for, ignoring case.'),
  scope: z
    .enum(["chat", "person"])
    .optional()
    .describe('"chat" (default): this conversation\'s memory. "person": the memory of a person speaking now, which follows them into every chat; for what they tell about themselves.'),
  person: z
    .string()
    .optional()
    .describe('Scope "person": whose memory, by the id in their label (e.g. discord:123). Needed only when several people speak in this turn.'),
});

/** Search results beyond this are counted, not listed, to keep the context small. */
const MAX_SEARCH_RESULTS = 50;

/** The memory one call works on: the store, its key, and how the answer names it. */
interface Target {
  store: MemoryStore;
  key: string;
  shown: string;
}

export function createMemoryTool(memory: MemoryStore, people?: PersonMemory): Tool<typeof parameters> {
  return defineTool({
    name: "memory",
    description:
      "Long-term memory that outlives this conversation's history (Markdown). Append lasting facts, preferences and " +
      "decisions as they come up; search it before saying you do not know something the user told you earlier; " +
      "write to replace it all, e.g. to condense it or fix a wrong fact." +
      (people ? ' What a person says about themselves goes to scope "person": it follows them into every chat and is shown only when they speak.' : ""),
    parameters,
    async execute(args, context) {
      const target = targetOf(args, context, memory, people);
      const { store, key, shown } = target;

      switch (args.action) {
        case "read": {
          const content = await store.read(key);
          if (content.trim() === "") return `Memory is empty (${shown}). Use action "append" to save something worth remembering.`;
          return content;
        }
        case "write": {
          const content = required(args.content, "content", "write", "Send the whole new memory text in `content`.");
          await store.write(key, content);
          return `Saved the memory (${Buffer.byteLength(content, "utf8")} bytes) to ${shown}.`;
        }
        case "append": {
          const content = required(args.content, "content", "append", "Send the note to add in `content`.");
          await store.append(key, content);
          return `Appended a dated note to ${shown}.`;
        }
        case "search": {
          const query = required(args.query, "query", "search", "Send the text to look for in `query`.");
          return formatMatches(query, await store.search(key, query));
        }
      }
    },
  });
}

function targetOf(args: z.infer<typeof parameters>, context: ToolContext, memory: MemoryStore, people: PersonMemory | undefined): Target {
  if ((args.scope ?? "chat") === "chat") {
    const scope = memory.scope === "global" ? "global memory" : "this chat's memory";
    return { store: memory, key: context.sessionKey, shown: `${scope}, ${memory.location(context.sessionKey)}` };
  }
  if (!people) throw new ToolError("person memory is not available here", 'Use scope "chat".');
  const speakers = context.speakers ?? [];
  if (speakers.length === 0) throw new ToolError("nobody is speaking in this turn, so there is no person memory to use", 'Use scope "chat".');
  const person = args.person?.trim() || (speakers.length === 1 ? speakers[0]! : undefined);
  if (person === undefined) throw new ToolError(`several people speak in this turn: say whose memory in \`person\` (one of ${speakers.join(", ")})`, "Name the person the fact is about.");
  if (!speakers.includes(person)) {
    throw new ToolError(`${person} does not speak in this turn; person memory is only for the people speaking now (${speakers.join(", ")})`, "A member's memory is private: never read or write another member's.");
  }
  const key = people.keyOf(person);
  return { store: people.store, key, shown: `person memory of ${person}, ${people.store.location(key)}` };
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
