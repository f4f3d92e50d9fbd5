/**
 * The Store contract: durable state behind small interfaces, one file store and (later) one Redis
 * store passing the same conformance suite. Sessions are the first part; teams, tasks and pairing
 * join it with their issues.
 */

/** One entry of a session's history, as the model will see it again. */
export interface HistoryEntry {
  role: "user" | "assistant";
  content: string;
  /** ms since epoch */
  at: number;
  /** Inbound message ids this entry came from (user entries), for tracing. */
  messageIds?: string[];
  /** Token usage of the turn that produced this entry (assistant entries). */
  usage?: { inputTokens: number; outputTokens: number };
  /** `provider/model` that answered (assistant entries). */
  model?: string;
}

export interface SessionMeta {
  key: string;
  createdAt: number;
  updatedAt: number;
  /** Incremented by `reset` (`/new`); older generations are archived, not deleted. */
  generation: number;
}

export interface SessionSnapshot {
  meta: SessionMeta;
  history: HistoryEntry[];
}

/**
 * Proof that the writer still holds the session's bus lease. A store that shares Redis with the
 * bus checks it atomically with the write; others rely on the caller's check.
 */
export interface Fence {
  token: number;
}

export interface SessionStore {
  /** The session's current history; an unknown key yields an empty session (not persisted yet). */
  load(key: string): Promise<SessionSnapshot>;
  /** Append entries to the history. With a fence, throws BusError("lease-lost") and writes nothing when the lease is gone. */
  append(key: string, entries: HistoryEntry[], fence?: Fence): Promise<void>;
  /**
   * Replace the history with `keep` (what remains after older entries were summarized away).
   * The dropped entries stay readable in the archive.
   */
  compact(key: string, keep: HistoryEntry[], fence?: Fence): Promise<void>;
  /** Start a fresh session (`/new`): the current history is archived and the new one is empty. */
  reset(key: string): Promise<void>;
  /** Known session keys. */
  list(): Promise<SessionMeta[]>;
}

export interface Store {
  sessions: SessionStore;
  close(): Promise<void>;
}
