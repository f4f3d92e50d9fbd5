/**
 * The tool conversation history (the Python CountBot's `conversation_history`): what each session's
 * tools were asked and answered, queryable per session, newest first.
 *
 * Kept small on purpose: results, user messages and string arguments are cut, secrets are redacted
 * as in the audit log, and a session keeps its last `maxEntries` calls. Two implementations behind
 * one contract (the composition root chooses): files here, for one process, and a list per session
 * in Redis (./redis-tool-history.ts), which every gateway reads whichever worker made the calls.
 *
 * Files: one JSONL file per session at `<directory>/<safeFileName(sessionKey)>.jsonl`, one line per
 * call, compacted once it holds twice `maxEntries` (so most adds are a plain append). One process
 * owns a directory: operations on one session are serialized in memory, not with file locks.
 */
import { mkdir, open, readFile, rm } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { createKeyedQueue, safeFileName, writeFileAtomic } from "../store/file-io.js";
import { capStrings, createToolCallRedactor, truncateText } from "./audit-log.js";
import { forgetOldest } from "../bounded.js";

const ToolHistoryEntrySchema = z.object({
  /** When the call was recorded, ms since epoch. */
  at: z.number(),
  tool: z.string(),
  arguments: z.unknown(),
  /** The user message of the turn that led to the call. */
  userMessage: z.string(),
  result: z.string(),
  durationMs: z.number(),
  success: z.boolean(),
});

/** One recorded tool call of a session. */
export type ToolHistoryEntry = z.infer<typeof ToolHistoryEntrySchema>;

export interface ToolHistoryInput {
  sessionKey: string;
  tool: string;
  /** Parsed arguments, or the raw text when they did not parse. */
  arguments: unknown;
  userMessage: string;
  result: string;
  durationMs: number;
  success: boolean;
}

export interface ToolHistoryListOptions {
  /** At most this many entries (the newest). Default: all that are kept. */
  limit?: number;
  /** Only calls of this tool. */
  tool?: string;
}

export interface ToolHistory {
  add(input: ToolHistoryInput): Promise<void>;
  /** The session's calls, newest first. */
  list(sessionKey: string, options?: ToolHistoryListOptions): Promise<ToolHistoryEntry[]>;
  /** Forgets every call of the session. */
  clear(sessionKey: string): Promise<void>;
  /** Waits for pending operations; later ones reject. */
  close(): Promise<void>;
}

/** How entries are made, whatever keeps them. */
export interface ToolHistoryEntryOptions {
  /** Clock in ms since epoch; injected so tests are deterministic. */
  now?: () => number;
  /** Results and user messages are cut to this many characters. Default 2,000. */
  maxTextChars?: number;
  /** Calls kept per session. Default 500. */
  maxEntries?: number;
  /** Known secret values (collectSecrets(config)), scrubbed from everything stored. */
  secrets?: readonly string[];
}

export interface ToolHistoryOptions extends ToolHistoryEntryOptions {
  directory: string;
  /** Sessions whose line count is remembered (the most recently used); another is counted again from its file. Default 10,000. */
  countedSessions?: number;
}

export const DEFAULT_TOOL_HISTORY_ENTRIES = 500;

const SUFFIX = ".jsonl";
/** String arguments are cut harder than results: they are rarely what one looks for here. */
const ARGUMENT_STRING_CHARS = 1_000;

/** Makes the entry a call is kept as: timed now, redacted, cut. */
export function toolHistoryEntryMaker(options: ToolHistoryEntryOptions): (input: ToolHistoryInput) => ToolHistoryEntry {
  const now = options.now ?? Date.now;
  const maxTextChars = options.maxTextChars ?? 2_000;
  const redactor = createToolCallRedactor(options.secrets ?? []);
  return (input) => ({
    at: now(),
    tool: input.tool,
    // Redact before cutting, so a secret across the cut cannot half-survive.
    arguments: capStrings(redactor.value(input.arguments), ARGUMENT_STRING_CHARS),
    userMessage: truncateText(redactor.text(input.userMessage), maxTextChars),
    result: truncateText(redactor.text(input.result), maxTextChars),
    durationMs: input.durationMs,
    success: input.success,
  });
}

/** Newest first, filtered and limited as `list` promises; `entries` oldest first. */
export function selectEntries(entries: ToolHistoryEntry[], options: ToolHistoryListOptions): ToolHistoryEntry[] {
  const matching = options.tool === undefined ? entries : entries.filter((entry) => entry.tool === options.tool);
  const newestFirst = matching.reverse();
  return options.limit === undefined ? newestFirst : newestFirst.slice(0, Math.max(0, options.limit));
}

/** The tool history in JSONL files, one per session. */
export function createFileToolHistory(options: ToolHistoryOptions): ToolHistory {
  const maxEntries = options.maxEntries ?? DEFAULT_TOOL_HISTORY_ENTRIES;
  const entryOf = toolHistoryEntryMaker(options);
  const queue = createKeyedQueue();
  /** Lines in the files of the sessions used last, counted on first use (a bounded cache: forgetting one costs a read). */
  const counts = new Map<string, number>();
  const countedSessions = options.countedSessions ?? 10_000;
  const remember = (name: string, count: number) => {
    counts.delete(name);
    counts.set(name, count);
    forgetOldest(counts, countedSessions);
  };
  let closed = false;

  const fileOf = (name: string) => path.join(options.directory, `${name}${SUFFIX}`);

  function serialized<T>(sessionKey: string, operation: (name: string) => Promise<T>): Promise<T> {
    if (closed) return Promise.reject(new Error("the tool history is closed"));
    let name: string;
    try {
      name = safeFileName(sessionKey);
    } catch (error) {
      return Promise.reject(error);
    }
    return queue.run(name, () => operation(name));
  }

  async function readEntries(name: string): Promise<ToolHistoryEntry[]> {
    const text = await readFile(fileOf(name), "utf8").catch((error: unknown) => (isMissing(error) ? "" : Promise.reject(error)));
    // A torn or corrupt line costs that call, not the history.
    return text.split("\n").flatMap((line) => {
      const entry = parseEntry(line);
      return entry ? [entry] : [];
    });
  }

  return {
    add(input) {
      return serialized(input.sessionKey, async (name) => {
        const entry = entryOf(input);
        const count = counts.get(name) ?? (await readEntries(name)).length;
        await mkdir(options.directory, { recursive: true });
        await appendLine(fileOf(name), `${JSON.stringify(entry)}\n`);
        remember(name, count + 1);
        if (count + 1 > 2 * maxEntries) {
          const kept = (await readEntries(name)).slice(-maxEntries);
          await writeFileAtomic(fileOf(name), kept.map((item) => `${JSON.stringify(item)}\n`).join(""));
          remember(name, kept.length);
        }
      });
    },

    list(sessionKey, listOptions = {}) {
      return serialized(sessionKey, async (name) => {
        // The file may hold up to twice as many until it is compacted; the session keeps maxEntries.
        return selectEntries((await readEntries(name)).slice(-maxEntries), listOptions);
      });
    },

    clear(sessionKey) {
      return serialized(sessionKey, async (name) => {
        await rm(fileOf(name), { force: true });
        remember(name, 0);
      });
    },

    async close() {
      closed = true;
      await queue.drain();
    },
  };
}

/** One stored entry, or undefined for a torn or foreign one. */
export function parseEntry(line: string): ToolHistoryEntry | undefined {
  if (line.trim() === "") return undefined;
  try {
    const parsed = ToolHistoryEntrySchema.safeParse(JSON.parse(line));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Appends a line; a line torn by a crash mid-append is ended first, so the new one stays whole. */
async function appendLine(file: string, line: string): Promise<void> {
  const handle = await open(file, "a+");
  try {
    const { size } = await handle.stat();
    const last = Buffer.alloc(1);
    if (size > 0) await handle.read(last, 0, 1, size - 1);
    await handle.write(size > 0 && last[0] !== 0x0a ? `\n${line}` : line);
  } finally {
    await handle.close();
  }
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT";
}
