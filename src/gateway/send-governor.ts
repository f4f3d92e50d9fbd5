/**
 * The send governor of one bot account: every platform call of the channel asks it first, so the
 * platform's budgets (quotas.ts) are never exceeded and the platform never has to answer 429.
 *
 * - Finals, notices and the gateway's own replies `acquire`: they wait, as long as it takes, for
 *   room in every budget the call counts against, and may use a budget to its limit. Waiters on one
 *   budget queue here, and only the first asks the store again (when the store said room would
 *   come), so a thousand finals waiting on the bot's budget cost one store call per slot, not a
 *   thousand. The queue serves the call with the longest backlog of its chat behind it first, the
 *   oldest reply among equals (backlog-queues.ts): a busy group's finals, paced by its own chat's
 *   window, are not each put behind every chat that queued meanwhile. And a chat with nothing
 *   queued leaves a call of each of the bot's budgets to each busy chat (one with replies queued
 *   behind the one it sends; the store lists them for every gateway, ChatNote), so that a busy
 *   chat's next call finds room when it comes back a round trip later. The queues know only this
 *   process's calls.
 * - Drafts and typing `tryAcquire`: taken now or not at all, only down to each budget's reserve,
 *   and never while a final waits here on one of its budgets or a 429 closed it ("closed": the
 *   caller shows no more drafts until the final; "low": the caller shows fewer, larger ones). The
 *   reserve is half the budget and a call for each reply streaming into it, and all of a budget of
 *   a long window (a Telegram group's minute) while several replies stream into it: drafts spent
 *   there would hold its finals back for up to a whole window, so a busy group's finals keep their
 *   budget and a quiet one still streams. A reply's first draft into a shared budget waits a
 *   moment, so that replies asked for together are all counted before any draft spends it.
 * - A call the platform answered late is counted from its answer (`answered`): the platform counts
 *   a call when it arrives, and one taken here may sit in a loaded event loop or a slow network
 *   for longer than the margin; counted from its answer, the next call of its budget cannot arrive
 *   inside its window. How late is measured from when the take was asked of the store, not from
 *   when the store's answer reached this process: the store counts the call from the moment it
 *   took it, and a loaded event loop may hand its answer over much later (in the quota bench a
 *   call answered 44 ms after the governor heard of its take had been taken 188 ms before its
 *   answer, and reached the platform inside the window of another gateway's next call). A call
 *   answered within the margin costs nothing more; one still unanswered a whole window after its
 *   take holds its budgets here until its answer comes. While this process's event loop runs
 *   behind (`lagMs`) by half a window or more, its calls are counted from that much after their
 *   take, in the shared store: the other gateways of the bot count them as late as they arrive
 *   even before their answers come. (Less behind, the answer comes first.)
 * - A 429 that still arrives `rateLimited`: the budget the platform named (or the chat's, when it
 *   did not say) is closed in the store for the wait the platform asked, for every process at once.
 *
 * The store decides (memory for one process, Redis for all gateways of the bot); the governor only
 * maps calls onto budget keys and orders the waiting.
 */
import { randomUUID } from "node:crypto";
import type { ChatType } from "../bus/message.js";
import { sleep as defaultSleep } from "../sleep.js";
import type { PlatformCall, PlatformQuotas, QuotaScopeKind } from "./quotas.js";
import type { ChatNote, QuotaStore, TakeResult } from "./quota-store.js";
import { BacklogQueues, type Rank } from "./backlog-queues.js";
import { BUSY_IDLE_MS, BusyChats, type NamedSlot, StreamingReplies, type Taken, UnansweredCalls, draftReserve, sharedStream } from "./governor-ledgers.js";
import { forgetOldest } from "../bounded.js";

/** One platform call, as the budgets see it. */
export interface GovernedCall {
  call: PlatformCall;
  chatId: string;
  /** Decides whether `group` budgets apply; unknown counts as a group (the stricter reading). */
  chatType?: ChatType;
  /** The message an edit changes: the key of `message` budgets. */
  messageId?: string;
  /** Platform calls this makes (a final the adapter splits over several cards). Default 1. */
  cost?: number;
  /** The reply a draft streams or a final ends: counts the replies streaming into a budget. */
  replyId?: string;
  /**
   * Calls of the same chat queued behind this one (the rest of its final, the finals after it):
   * among calls waiting for one budget, the longest backlog goes first. Default 0.
   */
  backlog?: number;
  /** When the reply was published (ms since the epoch): among equal backlogs the oldest goes first. Default: when it asks. */
  since?: number;
}

export type TryOutcome = "taken" | "low" | "closed";

export interface SendGovernor {
  readonly quotas: PlatformQuotas;
  /** Waits for room in every budget of the call, then takes it. Resolves with how long it waited. */
  acquire(call: GovernedCall, signal?: AbortSignal): Promise<number>;
  /** Takes room now, above the reserves, or says why not. */
  tryAcquire(call: GovernedCall): Promise<TryOutcome>;
  /**
   * The platform answered the call (with anything, or the request failed): when that was later
   * than the margin after its take was asked of the store, its budgets count it from now. Pass
   * the object given to `acquire` or `tryAcquire`; a call not taken, or answered already, changes
   * nothing.
   */
  answered(call: GovernedCall): Promise<void>;
  /**
   * A draft of the call's reply arrived (whether or not it will be shown): the reply streams into
   * the call's budgets, and each keeps a call for its final, until the final or a long silence.
   */
  streaming(call: GovernedCall): void;
  /** The platform answered 429: the budget `scope` (a scope name), or the call's chat budgets, close for `retryAfterMs`. */
  rateLimited(call: GovernedCall, retryAfterMs: number, scope?: string): Promise<void>;
}

export interface SendGovernorOptions {
  quotas: PlatformQuotas;
  store: QuotaStore;
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Share of each budget (of 2 calls or more) that drafts and typing leave to finals. Default 0.5. */
  reserveShare?: number;
  /**
   * Added to each budget's window: a call is counted when it is taken here but when it arrives at
   * the platform, and two calls taken a window apart may arrive closer than that. Default 5% of
   * the window, at least 20 ms and at most 250 ms.
   */
  marginMs?: (windowMs: number) => number;
  /** A call had to wait for its budget. */
  onDeferred?: () => void;
  /**
   * How far behind this process's event loop runs now (ms): a call taken here reaches the platform
   * about that much later, so it is counted from then, for every gateway. Default 0.
   */
  lagMs?: () => number;
}

const GROUP_TYPES = new Set<ChatType | undefined>(["group", "thread", undefined]);
export function createSendGovernor(options: SendGovernorOptions): SendGovernor {
  return new QuotaSendGovernor(options);
}

/** The default margin: 2% of the window, at least 20 ms and at most 250 ms. */
function defaultMargin(windowMs: number): number {
  return Math.min(250, Math.max(20, Math.round(windowMs * 0.02)));
}

/** The governor over a QuotaStore: maps calls onto budget slots and orders the waiting per budget. */
class QuotaSendGovernor implements SendGovernor {
  readonly quotas: PlatformQuotas;
  private readonly store: QuotaStore;
  private readonly now: () => number;
  private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  private readonly share: number;
  private readonly margin: (windowMs: number) => number;
  private readonly queues = new BacklogQueues();
  /** Budgets a 429 closed, known here: drafts stop at once instead of asking the store. */
  private readonly closedUntil = new Map<string, number>();
  private readonly streams = new StreamingReplies();
  /** Calls taken and not yet answered, by the caller's call object. */
  private readonly inFlight = new WeakMap<GovernedCall, Taken>();
  private readonly unanswered = new UnansweredCalls();
  private readonly busy = new BusyChats();
  private readonly lag: () => number;

  constructor(private readonly options: SendGovernorOptions) {
    this.quotas = options.quotas;
    this.store = options.store;
    this.now = options.now ?? Date.now;
    this.sleep = options.sleep ?? defaultSleep;
    this.share = options.reserveShare ?? 0.5;
    this.margin = options.marginMs ?? defaultMargin;
    this.lag = options.lagMs ?? (() => 0);
  }

  async acquire(call: GovernedCall, signal?: AbortSignal): Promise<number> {
    const slots = this.slotsFor(call);
    if (slots.length === 0) return 0;
    const cost = call.cost ?? 1;
    const token = randomUUID();
    const started = this.now();
    const rank = { backlog: call.backlog ?? 0, since: call.since ?? started };
    const chat = this.quotas.platformChatOf?.(call.chatId) ?? call.chatId;
    const note: ChatNote = { chat, state: this.busy.note(chat, rank.backlog, started), idleMs: BUSY_IDLE_MS };
    const take = () => this.store.take(slots, cost, "wait", token, this.aheadMs(slots), note);
    this.streams.finished(slots, call.replyId);
    // Behind calls already waiting here on one of these budgets: they came first. A busy chat asks
    // the store anyway: the calls kept for it may be there.
    let blocked = slots.findIndex((slot) => this.queues.busy(slot.key));
    let waitMs = 0;
    if (blocked < 0 || note.state === "busy") {
      await this.untilAnswered(slots, signal);
      const askedAt = this.now();
      const first = await take();
      if (first.taken) {
        this.remember(call, { slots, token, cost, at: askedAt });
        return 0;
      }
      ({ blockedBy: blocked, waitMs } = first);
    }
    this.options.onDeferred?.();
    for (;;) {
      const result = await this.waitBehind(slots, take, blocked, waitMs, rank, signal);
      if (result.taken) {
        this.remember(call, { slots, token, cost, at: result.askedAt });
        return Math.max(0, this.now() - started);
      }
      ({ blockedBy: blocked, waitMs } = result);
    }
  }

  async tryAcquire(call: GovernedCall): Promise<TryOutcome> {
    const slots = this.slotsFor(call);
    if (slots.length === 0) return "taken";
    const at = this.now();
    if (slots.some((slot) => this.closedAt(slot, at) || this.queues.busy(slot.key))) return "closed";
    // Several replies streaming into a long-window budget (a busy group): its finals need all of it,
    // and another gateway may hold drafts of more of them than this one sees.
    const streaming = slots.map((slot) => this.streams.into(slot, call.replyId, at));
    const reserved = slots.map((slot, index) => ({ ...slot, reserve: draftReserve(slot, streaming[index]!.count), ...sharedStream(slot, call.replyId) }));
    // Only a group's replies come in bursts: a private chat's first draft goes out at once. While it
    // settles, the reply is counted in the store too (taking nothing), for every gateway to see.
    if (GROUP_TYPES.has(call.chatType) && streaming.some((stream) => stream.settling)) {
      if (reserved.some((slot) => slot.stream)) await this.store.take(reserved, 0, "try").catch(() => undefined);
      return "low";
    }
    if (this.unanswered.late(slots, at).length > 0) return "low";
    const token = randomUUID();
    const cost = call.cost ?? 1;
    const askedAt = this.now();
    const result = await this.store.take(reserved, cost, "try", token, this.aheadMs(slots));
    if (!result.taken) return "low";
    this.remember(call, { slots, token, cost, at: askedAt });
    return "taken";
  }

  streaming(call: GovernedCall): void {
    if (call.replyId === undefined) return;
    const at = this.now();
    for (const slot of this.slotsFor(call)) this.streams.into(slot, call.replyId, at);
  }

  async answered(call: GovernedCall): Promise<void> {
    const taken = this.inFlight.get(call);
    if (!taken) return;
    this.inFlight.delete(call);
    const late = this.now() - taken.at;
    const slots = taken.slots.filter((slot) => late > slot.marginMs);
    try {
      // From a margin before the answer: the next call of a budget is taken a window and a margin
      // after, so it arrives a window after the answer at the earliest, and this call before it.
      if (slots.length > 0) await this.store.answered(slots, taken.token, taken.cost, Math.min(...slots.map((slot) => slot.marginMs)));
    } finally {
      // Only now: a call waiting on this one takes from budgets that count it from its answer.
      this.unanswered.remove(taken);
    }
  }

  async rateLimited(call: GovernedCall, retryAfterMs: number, scope?: string): Promise<void> {
    const slots = this.slotsFor(call);
    const named = scope === undefined ? [] : slots.filter((slot) => slot.scope === scope);
    // Unnamed: the chat's own budgets. Closing the bot's on a guess would stop every chat.
    const closing = named.length > 0 ? named : slots.filter((slot) => !slot.account);
    const until = this.now() + retryAfterMs;
    for (const slot of closing) {
      this.closedUntil.set(slot.key, Math.max(until, this.closedUntil.get(slot.key) ?? 0));
      forgetOldest(this.closedUntil, 10_000);
      await this.store.close(slot, retryAfterMs);
    }
  }

  /**
   * How far ahead the calls of a take are counted: as far as this process's event loop runs behind,
   * once that is half the shortest window of the take or more. A call that sits in the loop is
   * answered late and counted again from its answer (`answered`), well before another gateway
   * may take its place a window after the take, unless the loop runs that far behind; counted
   * ahead for any lag, every call of a burst held each budget up to the lag longer than the
   * platform did (a fifth of Feishu's app budget at the start of the quota bench's burst).
   */
  private aheadMs(slots: NamedSlot[]): number {
    const lag = this.lag();
    if (lag <= 0) return 0;
    return slots.some((slot) => lag * 2 >= slot.windowMs) ? lag : 0;
  }

  /** Whether a 429 closed the slot's budget until after `at` (forgetting a closing that ran out). */
  private closedAt(slot: NamedSlot, at: number): boolean {
    const until = this.closedUntil.get(slot.key);
    if (until !== undefined && until <= at) this.closedUntil.delete(slot.key);
    return until !== undefined && until > at;
  }

  private remember(call: GovernedCall, taken: Pick<Taken, "slots" | "token" | "cost" | "at">): void {
    let settle = () => {};
    const entry: Taken = { ...taken, answered: new Promise<void>((resolve) => (settle = resolve)), settle };
    this.inFlight.set(call, entry);
    this.unanswered.add(entry);
  }

  /** Waits for the answers of this process's calls on these budgets that are a window old and unanswered. */
  private async untilAnswered(slots: NamedSlot[], signal?: AbortSignal): Promise<void> {
    for (let late = this.unanswered.late(slots, this.now()); late.length > 0; late = this.unanswered.late(slots, this.now())) {
      await Promise.race([Promise.all(late.map((entry) => entry.answered)), this.sleep(1_000, signal)]);
      signal?.throwIfAborted();
    }
  }

  /** The budget slots a call counts against, each with its reserve and its window widened by the margin. */
  private slotsFor(call: GovernedCall): NamedSlot[] {
    const slots: NamedSlot[] = [];
    for (const [scope, budget] of Object.entries(this.quotas.scopes)) {
      if (budget.calls && !budget.calls.includes(call.call)) continue;
      const key = this.keyOf(scope, budget.per, call);
      if (key === undefined) continue;
      const reserve = Math.min(budget.limit - 1, Math.floor(budget.limit * this.share));
      const marginMs = this.margin(budget.windowMs);
      slots.push({ key, limit: budget.limit, windowMs: budget.windowMs + marginMs, reserve, scope, per: budget.per, account: budget.per === "account", marginMs });
    }
    return slots;
  }

  /** The store key of the budget `scope` for this call; none when the budget does not apply to it. */
  private keyOf(scope: string, per: QuotaScopeKind, call: GovernedCall): string | undefined {
    const platformChat = this.quotas.platformChatOf?.(call.chatId) ?? call.chatId;
    if (per === "chat") return `${scope}:${platformChat}`;
    if (per === "group" && GROUP_TYPES.has(call.chatType)) return `${scope}:${platformChat}`;
    if (per === "account") return scope;
    if (per === "message" && call.messageId !== undefined) return `${scope}:${call.messageId}`;
    return undefined;
  }

  /** Waits in the queue of the budget that stood in the way, until the store lets this call through or names another budget. */
  private async waitBehind(slots: NamedSlot[], take: () => Promise<TakeResult>, blocked: number, firstWaitMs: number, rank: Rank, signal?: AbortSignal) {
    // The time room was said to come: a call that had to queue behind others may find it come already.
    let roomAt = this.now() + firstWaitMs;
    const key = slots[blocked]!.key;
    return this.queues.run(key, rank, async () => {
      for (;;) {
        const waitMs = roomAt - this.now();
        if (waitMs > 0) await this.sleep(waitMs, signal);
        signal?.throwIfAborted();
        // Woken by the room: a busier chat's call that queued meanwhile takes it first.
        if (this.queues.outranked(key, rank)) {
          await this.queues.yield(key, rank);
          continue;
        }
        await this.untilAnswered(slots, signal);
        const askedAt = this.now();
        const result = await take();
        if (result.taken || result.blockedBy !== blocked) return { ...result, askedAt };
        roomAt = this.now() + result.waitMs;
      }
    });
  }
}
