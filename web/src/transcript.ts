/**
 * A chat as the page shows it: the user's messages, the replies (streamed as drafts, then final),
 * one line per tool call, and the task and team notices, in the order they came. A reply or notice
 * that arrives twice (a retry, a reconnect) is shown once. Kept in localStorage per chat with the
 * last seq seen, so a reload or a reconnect resumes where the page was.
 */
import type { HistoryEntry, WebEvent } from "./types";

export type TranscriptItem =
  | { kind: "user"; id: string; text: string; images: string[]; imageCount: number; status: "sending" | "sent" | "failed"; error?: string }
  | { kind: "assistant"; id: string; parts: string[]; streaming: boolean }
  | { kind: "tool"; id: string; text: string }
  | { kind: "notice"; id: string; text: string }
  /** The model's reasoning (`agent.showReasoning`), shown dimmed apart from the reply. */
  | { kind: "reasoning"; id: string; text: string }
  | { kind: "divider"; id: string; text: string };

export interface Transcript {
  items: TranscriptItem[];
  /** The last seq the page saw: the resume token. */
  seq?: string;
}

export type TranscriptAction =
  | { type: "load"; transcript: Transcript }
  | { type: "history"; entries: HistoryEntry[] }
  | { type: "user"; item: Extract<TranscriptItem, { kind: "user" }> }
  | { type: "user-status"; id: string; status: "sent" | "failed"; error?: string }
  | { type: "divider"; id: string; text: string }
  | { type: "event"; event: WebEvent }
  | { type: "seq"; seq: string };

const MAX_ITEMS = 300;

export function transcriptReducer(state: Transcript, action: TranscriptAction): Transcript {
  switch (action.type) {
    case "load":
      return action.transcript;
    case "history":
      return {
        ...state,
        items: action.entries.map((entry, index): TranscriptItem =>
          entry.role === "user"
            ? { kind: "user", id: `history-${index}`, text: entry.content, images: [], imageCount: 0, status: "sent" }
            : entry.role === "event"
              ? // What a background event said is for the model (it carries internal markers): one line names it.
                { kind: "notice", id: `history-${index}`, text: `Background event: ${firstLine(entry.content)}` }
              : { kind: "assistant", id: `history-${index}`, parts: [entry.content], streaming: false },
        ),
      };
    case "user":
      return { ...state, items: trim([...state.items, action.item]) };
    case "user-status":
      return { ...state, items: state.items.map((item) => (item.kind === "user" && item.id === action.id ? { ...item, status: action.status, error: action.error } : item)) };
    case "divider":
      return { ...state, items: trim([...state.items, { kind: "divider", id: action.id, text: action.text }]) };
    case "seq":
      return { ...state, seq: action.seq };
    case "event":
      return { ...state, items: trim(applyEvent(state.items, action.event)) };
  }
}

function applyEvent(items: TranscriptItem[], event: WebEvent): TranscriptItem[] {
  if (event.type === "draft") {
    const index = items.findIndex((item) => item.kind === "assistant" && item.id === event.replyId);
    if (index === -1) return [...items, { kind: "assistant", id: event.replyId, parts: [event.text], streaming: true }];
    const current = items[index] as Extract<TranscriptItem, { kind: "assistant" }>;
    // A late draft never overwrites the final text.
    if (!current.streaming) return items;
    return replaceAt(items, index, { ...current, parts: [event.text] });
  }
  if (event.type === "message") {
    const index = items.findIndex((item) => item.kind === "assistant" && item.id === event.id);
    const part = event.part ?? 0;
    if (index === -1) {
      // A chat opened from its history may be sent a reply the history already holds (never delivered to a page).
      const last = items.findLast((item) => item.kind === "assistant");
      if (last?.id.startsWith("history-") && (last as Extract<TranscriptItem, { kind: "assistant" }>).parts.join("") === event.content) return items;
      const parts: string[] = [];
      parts[part] = event.content;
      return [...items, { kind: "assistant", id: event.id, parts, streaming: false }];
    }
    const current = items[index] as Extract<TranscriptItem, { kind: "assistant" }>;
    const parts = current.streaming ? [] : [...current.parts];
    parts[part] = event.content;
    return replaceAt(items, index, { ...current, parts, streaming: false });
  }
  // Streamed team text belongs to the Runs view, not to the chat's lines.
  // Streamed text, and a run's start and end (the chat platforms' status message), are not lines of their own here.
  if (event.workflow?.event === "node-chunk" || event.workflow?.event?.startsWith("run-")) return items;
  if (items.some((item) => (item.kind === "notice" || item.kind === "tool" || item.kind === "reasoning") && item.id === event.id)) return items;
  // Kept notices (a task's, a team's) carry a seq or a workflow; reasoning says so; the rest are tool-call lines.
  const kind = event.reasoning ? "reasoning" : event.seq !== undefined || event.workflow !== undefined ? "notice" : "tool";
  return [...items, { kind, id: event.id, text: event.content }];
}

function replaceAt<T>(items: T[], index: number, item: T): T[] {
  const copy = [...items];
  copy[index] = item;
  return copy;
}

function trim(items: TranscriptItem[]): TranscriptItem[] {
  return items.length > MAX_ITEMS ? items.slice(-MAX_ITEMS) : items;
}

const storageKey = (chatId: string) => `countbot:chat:${chatId}`;

export function loadTranscript(chatId: string): Transcript | undefined {
  try {
    const raw = localStorage.getItem(storageKey(chatId));
    return raw === null ? undefined : (JSON.parse(raw) as Transcript);
  } catch {
    return undefined;
  }
}

/** Images are not kept (they would fill the storage): a kept message says how many it had. */
export function saveTranscript(chatId: string, transcript: Transcript): void {
  const items = transcript.items.map((item) => (item.kind === "user" ? { ...item, images: [] } : item));
  try {
    localStorage.setItem(storageKey(chatId), JSON.stringify({ ...transcript, items }));
  } catch {
    // Storage full or off: the chat still works, it only will not survive a reload.
  }
}

/** The text a reply shows: its parts in order. */
export function replyText(item: Extract<TranscriptItem, { kind: "assistant" }>): string {
  return item.parts.filter((part) => part !== undefined).join("");
}

/** The first line of a background event, without its `[Background event]` tag. */
function firstLine(text: string): string {
  const line = text.replace(/^\[Background event\]\s*/, "").split("\n", 1)[0] ?? "";
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}
