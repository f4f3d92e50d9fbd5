/**
 * Keeps a session's history within `maxHistory`: the overflow is summarized by the model into
 * memory and dropped from the context (the store archives it). Summarizing must never wedge a
 * chat: a failing or overflowing summary falls back to smaller pieces, then to a plain extract.
 */
import { BudgetExhaustedError, errorMessage } from "../errors.js";
import type { ChatModel } from "../providers/chat-model.js";
import type { Fence, HistoryEntry, SessionStore } from "../store/store.js";

const CHUNK_CHARS = 24_000;
const MAX_SPLIT_DEPTH = 3;
const SUMMARY_TIMEOUT_MS = 90_000;

export interface CompactOptions {
  model: ChatModel;
  sessions: SessionStore;
  /** Where the summary goes: the session's memory. */
  remember: (summary: string) => Promise<void>;
  sessionKey: string;
  history: HistoryEntry[];
  maxHistory: number;
  /** The turn's lease token: a worker that lost its lease must not rewrite the history. */
  fence?: Fence;
  signal?: AbortSignal;
  onWarning?: (message: string) => void;
}

/** Returns the history to use for the turn (compacted when it was over the limit). */
export async function compactHistory(options: CompactOptions): Promise<HistoryEntry[]> {
  const { history, maxHistory } = options;
  if (history.length <= maxHistory) return history;
  // Halve the window so summarizing happens every maxHistory/2 messages, not on every turn.
  let cut = history.length - Math.max(1, Math.floor(maxHistory / 2));
  // Start the kept part at a user message so the model never sees an answer without its question.
  while (cut < history.length && history[cut]!.role === "assistant") cut += 1;
  const overflow = history.slice(0, cut);
  const keep = history.slice(cut);
  if (overflow.length === 0) return history;

  const summary = await summarize(options, overflow);
  try {
    await options.remember(summary);
  } catch (error) {
    options.onWarning?.(`could not write the summary to memory: ${errorMessage(error)}`);
  }
  await options.sessions.compact(options.sessionKey, keep, options.fence);
  return keep;
}

async function summarize(options: CompactOptions, entries: HistoryEntry[]): Promise<string> {
  const date = new Date(entries.at(-1)?.at ?? Date.now()).toISOString().slice(0, 10);
  const pieces: string[] = [];
  for (const chunk of chunkEntries(entries, CHUNK_CHARS)) pieces.push(await summarizeChunk(options, chunk, 0));
  return `Summary of ${entries.length} earlier messages (through ${date}):\n${pieces.join("\n")}`;
}

async function summarizeChunk(options: CompactOptions, entries: HistoryEntry[], depth: number): Promise<string> {
  try {
    return await askModel(options, entries);
  } catch (error) {
    options.onWarning?.(`summarizing ${entries.length} messages failed: ${errorMessage(error)}`);
    // Aborted, or refused for a used-up budget: more model calls would fare no better.
    if (options.signal?.aborted || error instanceof BudgetExhaustedError) return extract(entries);
    if (depth < MAX_SPLIT_DEPTH && entries.length > 1) {
      const middle = Math.ceil(entries.length / 2);
      const left = await summarizeChunk(options, entries.slice(0, middle), depth + 1);
      const right = await summarizeChunk(options, entries.slice(middle), depth + 1);
      return `${left}\n${right}`;
    }
    return extract(entries);
  }
}

async function askModel(options: CompactOptions, entries: HistoryEntry[]): Promise<string> {
  const transcript = entries.map((entry) => `${entry.role.toUpperCase()}: ${entry.content}`).join("\n\n");
  const timeout = AbortSignal.timeout(SUMMARY_TIMEOUT_MS);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  let text = "";
  for await (const part of options.model.stream({
    messages: [
      {
        role: "system",
        content:
          "You condense conversations into long-term memory notes. Write short bullet points of the lasting facts, user preferences, decisions, open tasks and names. Skip greetings and small talk. Never include secrets.",
      },
      { role: "user", content: `Summarize this conversation excerpt:\n\n${transcript}` },
    ],
    maxTokens: 1024,
    temperature: 0.2,
    signal,
  })) {
    if (part.type === "text-delta") text += part.text;
  }
  if (text.trim() === "") throw new Error("the model returned an empty summary");
  return text.trim();
}

/** A summary without the model: the start of each user message. */
function extract(entries: HistoryEntry[]): string {
  const lines = entries
    .filter((entry) => entry.role !== "assistant")
    .map((entry) => `- ${entry.role === "event" ? "background event" : "user said"}: ${entry.content.replace(/\s+/g, " ").slice(0, 200)}`);
  return ["(automatic extract; the model could not summarize)", ...lines].join("\n");
}

function chunkEntries(entries: HistoryEntry[], limit: number): HistoryEntry[][] {
  const chunks: HistoryEntry[][] = [];
  let current: HistoryEntry[] = [];
  let size = 0;
  for (const entry of entries) {
    if (current.length > 0 && size + entry.content.length > limit) {
      chunks.push(current);
      current = [];
      size = 0;
    }
    current.push(entry);
    size += entry.content.length;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
