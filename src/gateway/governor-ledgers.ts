/**
 * What the send governor (send-governor.ts) keeps between calls: the budget slots it names, the
 * takes still waiting for the platform's answer, and the replies streaming into each shared budget
 * with the reserve their drafts must leave.
 */
import type { QuotaScopeKind } from "./quotas.js";
import type { ChatNote, QuotaSlot } from "./quota-store.js";
import { forgetOldest } from "../bounded.js";

/** Budgets whose window is this long or longer keep a call for each reply streaming into them. */
export const LONG_WINDOW_MS = 10_000;
/**
 * A reply's first draft into a group's budget shared by several replies (a group's, a channel's)
 * waits this long: replies asked for together (a burst of @-mentions in a busy group) are all known
 * by then, so the budget is kept for their finals before any draft spends it. A quiet group's first
 * draft comes this much later; a private chat's, and a budget of one call, are never held back.
 */
export const SETTLE_MS = 1_000;
/** A reply whose drafts stopped coming this long ago no longer counts as streaming. */
export const STREAM_IDLE_MS = 120_000;
/** How often a budget's idle streaming replies are dropped. */
const PRUNE_EVERY_MS = 1_000;

export interface NamedSlot extends QuotaSlot {
  scope: string;
  per: QuotaScopeKind;
  account: boolean;
  /** What was added to the budget's window for the time between take and arrival. */
  marginMs: number;
}

/** A take not yet answered by the platform. */
export interface Taken {
  slots: NamedSlot[];
  token: string;
  cost: number;
  /**
   * When the take was asked of the store, by this process's clock: the store counted the calls
   * from then or later, however long its answer then took to reach this process (a loaded event
   * loop holds it), so the time from here to the platform's answer bounds how late a call can
   * have arrived after the time it counts from.
   */
  at: number;
  /** Resolves once the platform answered (or the take was given up on). */
  answered: Promise<void>;
  settle: () => void;
}

/** A take unanswered this long was never going to be: a caller that forgot `answered`, not a budget. */
export const UNANSWERED_GIVE_UP_MS = 30_000;

/**
 * This process's calls taken and not yet answered, per budget key. One taken a whole window ago and
 * still unanswered may not even have reached the platform (a congested event loop holds the
 * request, or its answer), so a call taken now could arrive inside its window: its answer is
 * waited for (`late`), and it counts from then.
 */
export class UnansweredCalls {
  private readonly byKey = new Map<string, Set<Taken>>();

  add(entry: Taken): void {
    for (const slot of entry.slots) {
      let entries = this.byKey.get(slot.key);
      if (!entries) this.byKey.set(slot.key, (entries = new Set()));
      entries.add(entry);
    }
  }

  remove(entry: Taken): void {
    entry.settle();
    for (const slot of entry.slots) {
      const entries = this.byKey.get(slot.key);
      if (entries?.delete(entry) && entries.size === 0) this.byKey.delete(slot.key);
    }
  }

  /** The calls on these budgets taken a window or more before `at` and still unanswered. */
  late(slots: readonly NamedSlot[], at: number): Taken[] {
    const late: Taken[] = [];
    for (const slot of slots) {
      for (const entry of this.byKey.get(slot.key) ?? []) {
        if (at - entry.at > UNANSWERED_GIVE_UP_MS) this.remove(entry);
        else if (at - entry.at >= slot.windowMs - slot.marginMs) late.push(entry);
      }
    }
    return late;
  }
}

/** How long a reply not seen in a shared long-window budget's store list still counts as streaming there. */
export const SHARED_STREAM_IDLE_MS = 15_000;

/**
 * A budget a chat's replies share (a group's minute, a channel's five seconds): the draft's reply
 * is counted in the store's list, every gateway's (this gateway may see one reply where a
 * hand-over gave the others to another). While several stream into a long window the whole budget
 * is kept for their finals; a short window keeps a call for each reply's final, as draftReserve
 * does with the replies this gateway sees.
 */
export function sharedStream(slot: NamedSlot, replyId: string | undefined): Pick<QuotaSlot, "stream"> {
  if (replyId === undefined || slot.limit < 2 || (slot.per !== "chat" && slot.per !== "group")) return {};
  return { stream: { replyId, idleMs: SHARED_STREAM_IDLE_MS, sharedReserve: slot.windowMs >= LONG_WINDOW_MS ? slot.limit : -1 } };
}

/**
 * What a draft must leave of the budget: half of it, and one call for each reply streaming into
 * it (its final); all of a chat's long window while several stream there (a draft spent there
 * holds their finals back up to a whole window). A bot's long window (Feishu's calls a minute) is
 * counted as a short one: every reply of the bot streams into it.
 */
export function draftReserve(slot: NamedSlot, streaming: number): number {
  if (slot.windowMs >= LONG_WINDOW_MS && slot.per !== "account") return streaming > 1 ? slot.limit : slot.reserve;
  return Math.min(slot.limit, Math.max(slot.reserve, streaming));
}

/**
 * The replies streaming drafts into each budget several replies share (a group's, a channel's, and
 * the bot's own), with when their first and last drafts came: each keeps a call of the budget for
 * its final. On the bot's budget that means drafts thin out once more replies stream than half of
 * it, and stop until the finals once as many stream as it has calls: with 300 replies streaming
 * into Feishu's 50 calls a second, every draft shown in the second before the finals pushed one of
 * them into a seventh second.
 */
export class StreamingReplies {
  private readonly streams = new Map<string, Map<string, { first: number; last: number }>>();
  /** When each budget's idle replies were last dropped: at most once a second, not on every draft (a bot may stream thousands). */
  private readonly prunedAt = new Map<string, number>();

  /** Notes the reply as streaming into the slot's budget; how many do, and whether this one only just began. */
  into(slot: NamedSlot, replyId: string | undefined, at: number): { count: number; settling: boolean } {
    // Budgets several replies share (a message's budget is one reply's alone).
    if (slot.per === "message" || slot.limit < 2) return { count: 0, settling: false };
    let replies = this.streams.get(slot.key);
    let first = at;
    if (replyId !== undefined) {
      if (!replies) this.streams.set(slot.key, (replies = new Map()));
      first = replies.get(replyId)?.first ?? at;
      replies.set(replyId, { first, last: at });
    }
    if (!replies) return { count: 0, settling: false };
    if (at - (this.prunedAt.get(slot.key) ?? Number.NEGATIVE_INFINITY) >= PRUNE_EVERY_MS) {
      this.prunedAt.set(slot.key, at);
      for (const [id, seen] of replies) if (at - seen.last > STREAM_IDLE_MS) replies.delete(id);
    }
    if (replies.size === 0) {
      this.streams.delete(slot.key);
      this.prunedAt.delete(slot.key);
    }
    return { count: replies.size, settling: replyId !== undefined && at - first < SETTLE_MS };
  }

  /** The reply's final is going out: it no longer streams into any of these budgets. */
  finished(slots: NamedSlot[], replyId: string | undefined): void {
    if (replyId === undefined) return;
    for (const slot of slots) {
      const replies = this.streams.get(slot.key);
      if (replies?.delete(replyId) && replies.size === 0) {
        this.streams.delete(slot.key);
        this.prunedAt.delete(slot.key);
      }
    }
  }
}

/** How long a chat counts as busy after it last asked with replies queued behind, or its own budget let it go on. */
export const BUSY_IDLE_MS = 1_000;

/** This process's busy chats (more replies queued behind the call they asked for), by platform chat. */
export class BusyChats {
  private readonly lastSeen = new Map<string, number>();

  /** Notes a final of `chat` with `backlog` behind it: how the store's list of busy chats must see it. */
  note(chat: string, backlog: number, at: number): ChatNote["state"] {
    const seen = this.lastSeen.get(chat);
    this.lastSeen.delete(chat);
    if (backlog > 0) {
      this.lastSeen.set(chat, at);
      forgetOldest(this.lastSeen, 10_000);
      return "busy";
    }
    // Its last final: its chat's own budget may have held it back for a window or more meanwhile.
    return seen !== undefined && at - seen < 60_000 ? "last" : "quiet";
  }
}
