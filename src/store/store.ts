import { z } from "zod";
import type { SubagentTask, TaskStats, TaskStatus } from "./task-record.js";
import type { NodePatch, NodeUpdateOptions, RunFilter, RunPatch, RunStatus, TeamRecord, WorkflowRun } from "./team-record.js";

/**
 * The Store contract: durable state behind small interfaces, one file store and (later) one Redis
 * store passing the same conformance suite: sessions, DM pairing, subagent tasks, agent teams and
 * their runs.
 */

/**
 * One entry of a session's history, as the model will see it again. Both stores check entries
 * with it on the way in and parse what they read back with it, so what one accepts the other does.
 */
export const HistoryEntrySchema = z.object({
  /**
   * `user`: what people said; `assistant`: the reply; `event`: a background event the agent
   * answered (a subagent or team finishing, a scheduled message, a heartbeat), which the model
   * reads as a user message and the console shows as an event, not as something a user said.
   */
  role: z.enum(["user", "assistant", "event"]),
  content: z.string(),
  /** ms since epoch */
  at: z.number(),
  /** Inbound message ids this entry came from (user entries), for tracing. */
  messageIds: z.array(z.string()).optional(),
  /** Who spoke in this entry (user entries: `channel:senderId` each), so the console can show their person memory. */
  speakers: z.array(z.string()).optional(),
  /** Token usage of the turn that produced this entry (assistant entries), as the provider reported it. */
  usage: z
    .object({
      inputTokens: z.number(),
      outputTokens: z.number(),
      cachedInputTokens: z.number().optional(),
      cacheWriteInputTokens: z.number().optional(),
      reasoningTokens: z.number().optional(),
    })
    .optional(),
  /** `provider/model` that answered (assistant entries). */
  model: z.string().optional(),
});
export type HistoryEntry = z.infer<typeof HistoryEntrySchema>;
/** A list of them: built once (a zod schema costs microseconds to build, more than a parse). */
export const HistoryEntriesSchema = z.array(HistoryEntrySchema);

/**
 * A history entry as canonical JSON (object keys sorted at every level: one text per value,
 * whatever the key order, so `compact` recognizes a kept entry). The schema knows every key, so the
 * object is built in sorted order and serialized without a replacer (JSON.stringify's fast path; a
 * sorting replacer was about 2 % of a worker's CPU in a profile). Absent fields are left out, as
 * JSON.stringify does.
 */
export function canonicalEntryJson(entry: HistoryEntry): string {
  const usage = entry.usage && {
    cacheWriteInputTokens: entry.usage.cacheWriteInputTokens,
    cachedInputTokens: entry.usage.cachedInputTokens,
    inputTokens: entry.usage.inputTokens,
    outputTokens: entry.usage.outputTokens,
    reasoningTokens: entry.usage.reasoningTokens,
  };
  return JSON.stringify({ at: entry.at, content: entry.content, messageIds: entry.messageIds, model: entry.model, role: entry.role, speakers: entry.speakers, usage });
}

/** Checked on the way in: an entry the loader would reject must fail now, not vanish on the next load. What is stored is the parsed copy. */
export function validEntries(entries: HistoryEntry[]): HistoryEntry[] {
  const parsed = HistoryEntriesSchema.safeParse(entries);
  if (!parsed.success) throw new Error(`invalid history entries: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** Entries as a Redis store keeps them (checked, canonical JSON): what a bus that appends history with its ack (`MessageBus.historyOnAck`) is given. */
export function storedEntryTexts(entries: HistoryEntry[]): string[] {
  return validEntries(entries).map(canonicalEntryJson);
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
 * bus checks it atomically with the write; the file store asks the bus (a LeaseCheck) just before
 * the write, in the same per-session queue. Either way a fenced write whose lease is gone throws
 * BusError("lease-lost") and writes nothing.
 */
export interface Fence {
  token: number;
}

/** Whether `fence` still holds the bus lease on `sessionKey`: the token is the current one and the lease has not expired. */
export type LeaseCheck = (sessionKey: string, fence: Fence) => Promise<boolean>;

export interface SessionStore {
  /** The session's current history; an unknown key yields an empty session (not persisted yet). */
  load(key: string): Promise<SessionSnapshot>;
  /** Append entries to the history. With a fence, throws BusError("lease-lost") and writes nothing when the lease is gone. */
  append(key: string, entries: HistoryEntry[], fence?: Fence): Promise<void>;
  /**
   * Replace the history with `keep` (what remains after older entries were summarized away).
   * The dropped entries stay readable in the archive. Fenced like `append`.
   */
  compact(key: string, keep: HistoryEntry[], fence?: Fence): Promise<void>;
  /** Start a fresh session (`/new`): the current history is archived and the new one is empty. Fenced like `append`. */
  reset(key: string, fence?: Fence): Promise<void>;
  /** Known session keys. */
  list(): Promise<SessionMeta[]>;
}

/** Who asked to pair: an unknown sender in a private chat. */
export interface PairingSender {
  /** Channel name on the bus, e.g. `telegram`. */
  channel: string;
  senderId: string;
  senderName?: string;
  /** The private chat the request came from (where the code was sent). */
  chatId: string;
}

/** A pending pairing request: valid until `expiresAt`, approved at most once. */
export interface PairingRequest extends PairingSender {
  /** 8 characters from an alphabet without look-alikes (no 0/O, 1/I). */
  code: string;
  /** ms since epoch */
  requestedAt: number;
  /** ms since epoch; the code is valid while `now < expiresAt`. */
  expiresAt: number;
}

/** A sender the operator approved: admitted like an `allowFrom` entry until revoked. */
export interface ApprovedPairing extends PairingSender {
  /** The code that was approved. */
  code: string;
  requestedAt: number;
  approvedAt: number;
}

/**
 * DM pairing: an unknown sender gets a short code that expires; the operator approves it
 * (`countbot pairing approve CODE`) and the sender is admitted from then on. Times are passed in,
 * not read from a clock, so expiry is the caller's (and the tests') to decide.
 */
export interface PairingStore {
  /**
   * The sender's pending request if its code is still valid, else a new one with a fresh code.
   * `created` tells which, so the code is sent to the sender once, not on every message.
   */
  request(sender: PairingSender, options: { ttlMs: number; now: number }): Promise<{ request: PairingRequest; created: boolean }>;
  /**
   * Approves the request holding `code` (case and separators ignored) and persists the approval.
   * Undefined when the code is unknown, expired, or was approved already.
   */
  approve(code: string, now: number): Promise<ApprovedPairing | undefined>;
  isApproved(channel: string, senderId: string): Promise<boolean>;
  /** Requests whose code is still valid at `now`, soonest to expire first (ties by code). */
  listPending(now: number): Promise<PairingRequest[]>;
  /** Approved senders (of one channel when given), oldest approval first. */
  listApproved(channel?: string): Promise<ApprovedPairing[]>;
  /** Withdraws an approval; false when the sender was not approved. */
  revoke(channel: string, senderId: string): Promise<boolean>;
}

/**
 * Subagent tasks. `update` is a compare-and-set on the status: it applies the patch only when the
 * task's status is one of `from` (so a cancelled task is never marked completed by a slow worker).
 */
export interface TaskStore {
  create(task: SubagentTask): Promise<void>;
  get(id: string): Promise<SubagentTask | undefined>;
  /** The updated task, or undefined when it does not exist or its status is not in `from`. */
  update(id: string, patch: Partial<Omit<SubagentTask, "id">>, from?: TaskStatus[]): Promise<SubagentTask | undefined>;
  /** Newest first. */
  list(filter?: { status?: TaskStatus; sessionKey?: string; limit?: number }): Promise<SubagentTask[]>;
  delete(id: string): Promise<boolean>;
  stats(): Promise<TaskStats>;
  /** Deletes finished tasks that completed before `before` (ms); returns how many. */
  cleanup(before: number): Promise<number>;
}

/**
 * Agent teams created through the API. Names are unique compared without case (`Research` and
 * `research` are one team), checked in the same step as the write.
 */
export interface TeamStore {
  /** Throws TeamConflictError when the id or the name is taken. */
  create(team: TeamRecord): Promise<void>;
  get(id: string): Promise<TeamRecord | undefined>;
  /** The team of this name, compared without case. */
  findByName(name: string): Promise<TeamRecord | undefined>;
  /** Every team, by name. */
  list(): Promise<TeamRecord[]>;
  /** Replaces the team with this id; false when there is none. Throws TeamConflictError when renamed onto another team's name. */
  replace(team: TeamRecord): Promise<boolean>;
  delete(id: string): Promise<boolean>;
}

/**
 * Workflow runs and the state of each node. Updates are compare-and-sets, so of two workers that
 * finish nodes of one run at the same moment each sees the other's write or is seen by it, and
 * of two that try to start the same node only one does.
 */
export interface WorkflowRunStore {
  /** Throws when a run with this id exists. */
  create(run: WorkflowRun): Promise<void>;
  get(id: string): Promise<WorkflowRun | undefined>;
  /** Newest first. */
  list(filter?: RunFilter): Promise<WorkflowRun[]>;
  /** The run after the patch, or undefined when it does not exist or its status is not in `from`. */
  updateRun(id: string, patch: RunPatch, from?: readonly RunStatus[]): Promise<WorkflowRun | undefined>;
  /** The run after the node's patch, or undefined when the run or node does not exist or a condition of `options` does not hold. */
  updateNode(id: string, nodeId: string, patch: NodePatch, options?: NodeUpdateOptions): Promise<WorkflowRun | undefined>;
  delete(id: string): Promise<boolean>;
  /**
   * Deletes finished runs (completed, failed, cancelled) that ended before `before` (ms: their
   * `completedAt`, or their creation when none was stamped); returns how many. Unfinished runs stay.
   */
  cleanup(before: number): Promise<number>;
}

export interface Store {
  sessions: SessionStore;
  tasks: TaskStore;
  pairing: PairingStore;
  teams: TeamStore;
  runs: WorkflowRunStore;
  close(): Promise<void>;
}
