/**
 * A team run's live status in the chat that started it (`teamProgress: "status-message"`): one
 * message per run, threaded to the trigger, edited in place as each agent waits, runs, finishes or
 * fails, with the time each took. Built from the run snapshot every workflow notice carries
 * (src/jobs/workflows/progress.ts), so notices may come in any order, from any worker.
 *
 * - Pace: at most one edit per `intervalMs` per run (the platform's edit pace, the channel's
 *   draft interval by default), always with the newest state; the run's end is always shown. Every
 *   call goes through the chat's lane, paced like the dispatcher's own sends, and only when the
 *   platform's budgets have room above the reserves (`budget`): finals come first.
 * - Order: of two snapshots the one further along wins (agents and run settle, never unsettle),
 *   so a late notice from a slower worker never winds the message back.
 * - Failover: the message's id is recorded on the bus like a draft message's, so a gateway that
 *   takes over the account edits the same message instead of posting a second one.
 * - Lossy like drafts: a failed edit is replaced by the next one; a rate limit is waited out.
 */
import type { Logger } from "pino";
import { z } from "zod";
import type { OutboundMessage } from "../bus/message.js";
import type { GatewayBus } from "../bus/message-bus.js";
import { ChannelError, errorMessage } from "../errors.js";
import { sleep } from "../sleep.js";
import type { ChannelAdapter } from "./channel.js";
import { forgetOldest } from "../bounded.js";

const AgentProgressSchema = z.object({
  id: z.string(),
  label: z.string(),
  status: z.string(),
  startedAt: z.number().optional(),
  completedAt: z.number().optional(),
});

const RunProgressSchema = z.object({
  id: z.string().min(1),
  team: z.string(),
  status: z.string(),
  createdAt: z.number(),
  completedAt: z.number().optional(),
  replyTo: z.string().optional(),
  agents: z.array(AgentProgressSchema),
});
export type RunProgress = z.infer<typeof RunProgressSchema>;

const NoticeSchema = z.object({ workflow: z.object({ run: RunProgressSchema }) });

export interface TeamStatusOptions {
  adapter: Pick<ChannelAdapter, "name" | "send" | "edit" | "capabilities">;
  bus: Pick<GatewayBus, "recordDraftMessage" | "draftMessageOf">;
  /** Runs one platform call in the chat's lane, paced like every other send to the chat. */
  inLane: <T>(chatId: string, call: () => Promise<T>) => Promise<T>;
  /**
   * Whether the platform's budgets have room for this call now (the send governor, above what
   * finals need); when not, the newest state is tried again after the interval. Default: always.
   */
  budget?: (call: { call: "send" | "edit"; chatId: string; messageId?: string }) => Promise<boolean>;
  /** The platform answered a call `budget` let through (the same object): a late answer counts from now. */
  answered?: (call: { call: "send" | "edit"; chatId: string; messageId?: string }) => Promise<void>;
  logger: Logger;
  /** Least time between two edits of one status message. Default: the channel's draftIntervalMs (at least 1 s). */
  intervalMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export interface TeamStatus {
  /** Takes a team run's notice (true: it is this component's now), or leaves it (false). */
  take(message: OutboundMessage): boolean;
  /** Resolves once nothing is scheduled or being shown. */
  idle(): Promise<void>;
  stop(): void;
}

interface RunState {
  chatId: string;
  progress: RunProgress;
  platformMessageId?: string;
  recalled: boolean;
  shown?: string;
  /** The progress shown last, by its rank: the end is shown once. */
  shownRank: number;
  lastShownAt: number;
  /** Failed attempts at the current state. */
  failures: number;
  scheduled?: Promise<void>;
}

const STATUS_RANK: Record<string, number> = { pending: 0, queued: 1, running: 2 };
const SETTLED = 3;
const FINISHED_RUN = new Set(["completed", "failed", "cancelled"]);
const MEMORY_LIMIT = 1_000;
const DEFAULT_RATE_LIMIT_WAIT_MS = 1_000;
const MAX_FAILURES = 3;

export function createTeamStatus(options: TeamStatusOptions): TeamStatus {
  const { adapter, bus, logger } = options;
  const now = options.now ?? Date.now;
  const wait = options.sleep ?? sleep;
  const intervalMs = options.intervalMs ?? Math.max(adapter.capabilities.draftIntervalMs, 1_000);
  const runs = new Map<string, RunState>();
  let stopped = false;

  function take(message: OutboundMessage): boolean {
    if (message.kind !== "notice") return false;
    const parsed = NoticeSchema.safeParse(message.metadata);
    if (!parsed.success) return false;
    const progress = parsed.data.workflow.run;
    const key = `${message.chatId}\n${progress.id}`;
    let state = runs.get(key);
    if (!state) {
      state = { chatId: message.chatId, progress, recalled: false, shownRank: -1, lastShownAt: Number.NEGATIVE_INFINITY, failures: 0 };
      runs.set(key, state);
      forgetOldest(runs, MEMORY_LIMIT);
    } else if (rankOf(progress) >= rankOf(state.progress)) {
      state.progress = progress;
    }
    schedule(state);
    return true;
  }

  function schedule(state: RunState): void {
    if (state.scheduled || stopped || rankOf(state.progress) <= state.shownRank) return;
    const delay = state.lastShownAt + intervalMs - now();
    state.scheduled = (async () => {
      if (delay > 0) await wait(delay);
      await options.inLane(state.chatId, () => show(state));
    })()
      .catch((error: unknown) => logger.debug({ chatId: state.chatId, runId: state.progress.id, error: errorMessage(error) }, "team status not shown"))
      .finally(() => {
        state.scheduled = undefined;
        schedule(state);
      });
  }

  async function show(state: RunState): Promise<void> {
    if (stopped) return;
    const progress = state.progress;
    const text = renderStatus(progress, now());
    state.lastShownAt = now();
    try {
      if (!state.platformMessageId && !state.recalled) {
        state.recalled = true;
        state.platformMessageId = await bus.draftMessageOf(adapter.name, statusIdOf(progress.id));
      }
      const call = state.platformMessageId ? { call: "edit" as const, chatId: state.chatId, messageId: state.platformMessageId } : { call: "send" as const, chatId: state.chatId };
      if (text !== state.shown && options.budget && !(await options.budget(call))) return; // no room now: tried again after the interval
      if (state.platformMessageId) {
        if (text !== state.shown) await adapter.edit(state.chatId, state.platformMessageId, text, { format: "plain" }).finally(() => options.answered?.(call));
      } else {
        const sendOptions = { format: "plain" as const, idempotencyKey: `${statusIdOf(progress.id)}#draft`, ...(progress.replyTo ? { replyTo: progress.replyTo } : {}) };
        state.platformMessageId = (await adapter.send(state.chatId, text, sendOptions).finally(() => options.answered?.(call))).platformMessageId;
        await bus.recordDraftMessage(adapter.name, statusIdOf(progress.id), state.platformMessageId).catch((error: unknown) => {
          logger.warn({ chatId: state.chatId, runId: progress.id, error: errorMessage(error) }, "could not record the team status message");
        });
      }
      state.shown = text;
      state.shownRank = rankOf(progress);
      state.failures = 0;
    } catch (error) {
      noteFailure(state, progress, error, now(), intervalMs);
      throw error;
    }
  }

  return {
    take,
    async idle() {
      for (;;) {
        const pending = [...runs.values()].map((state) => state.scheduled).filter((scheduled) => scheduled !== undefined);
        if (pending.length === 0) return;
        await Promise.all(pending);
      }
    },
    stop() {
      stopped = true;
    },
  };
}

/**
 * What a failed attempt at showing `progress` changes: a 429 holds the next attempt back for the
 * wait the platform asked (less the interval, which the schedule adds back); a deleted
 * message is posted anew with the next state; a forbidden chat is shown nothing more; anything
 * else is tried again at the pace, a few times, then left for the next state.
 */
function noteFailure(state: RunState, progress: RunProgress, error: unknown, at: number, intervalMs: number): void {
  const kind = error instanceof ChannelError ? error.kind : "other";
  if (kind === "rate-limit") state.lastShownAt = at + ((error as ChannelError).retryAfterMs ?? DEFAULT_RATE_LIMIT_WAIT_MS) - intervalMs;
  else if (kind === "not-found") state.platformMessageId = undefined;
  else if (kind === "forbidden") state.shownRank = Number.POSITIVE_INFINITY;
  else if (++state.failures >= MAX_FAILURES) [state.shownRank, state.failures] = [rankOf(progress), 0];
}

/** The key the status message's id is recorded under on the bus. */
export function statusIdOf(runId: string): string {
  return `team-status:${runId}`;
}

/** How far along a snapshot is: agents and the run only ever move forward. */
function rankOf(progress: RunProgress): number {
  const agents = progress.agents.reduce((sum, agent) => sum + (STATUS_RANK[agent.status] ?? SETTLED), 0);
  return agents + (FINISHED_RUN.has(progress.status) ? progress.agents.length * SETTLED + 1 : 0);
}

const AGENT_WORDS: Record<string, string> = {
  pending: "⏸ waiting",
  queued: "⏸ waiting",
  running: "⏳ running",
  completed: "✅ done",
  failed: "❌ failed",
  "upstream-failed": "❌ not run (an agent it needs failed)",
  skipped: "⏭ skipped",
  cancelled: "⛔ cancelled",
};
const RUN_WORDS: Record<string, string> = { pending: "starting", running: "running", completed: "done", failed: "failed", cancelled: "cancelled" };

/** The status message: the run and its time, then one line per agent with its state and time. */
export function renderStatus(progress: RunProgress, time: number): string {
  const runEnd = progress.completedAt ?? time;
  const lines = [`Team [${progress.team}] · ${RUN_WORDS[progress.status] ?? progress.status} · ${elapsed(runEnd - progress.createdAt)}`];
  for (const agent of progress.agents) {
    const started = agent.startedAt;
    const took = started === undefined ? "" : ` · ${elapsed((agent.completedAt ?? (agent.status === "running" ? time : started)) - started)}`;
    lines.push(`${AGENT_WORDS[agent.status] ?? agent.status} · ${agent.label}${took}`);
  }
  return lines.join("\n");
}

function elapsed(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}
