/**
 * Where the send budgets are kept: sliding-window logs, one per budget key (`chat:-1001` of the
 * Telegram bot `telegram:ab12…`, say). In one process they live here in memory; over Redis every
 * gateway of the deployment shares them (redis-quota-store.ts, one Lua script per take). Both pass
 * tests/conformance/quota-store.suite.ts.
 *
 * A take asks for `cost` calls from several budgets together: it takes from all of them or from
 * none, and when it cannot, says which budget stands in the way and how long until it may have
 * room, so the caller sleeps that long instead of asking again and again.
 */

/** One budget a take draws from. */
export interface QuotaSlot {
  /** The budget's key within the account, e.g. `group:-1001234`. */
  key: string;
  limit: number;
  windowMs: number;
  /**
   * Calls kept for finals: a `try` take (a draft, typing) leaves at least this many of `limit`
   * unused. 0 for budgets of one chat, where a final waits behind the chat's own drafts anyway.
   */
  reserve: number;
  /** A budget of the whole account (the bot's, the app's): a quiet chat's final leaves calls of it to busy chats. */
  account?: boolean;
  /**
   * A draft's try only: the reply it streams, counted in the budget's list of replies streaming into
   * it, every gateway's (a hand-over splits a busy group's drafts between two); while more than one
   * streams, the try leaves `sharedReserve` instead of `reserve` (-1: as many calls as replies
   * stream, up to the limit, a call for each one's final). A reply not seen for `idleMs` no longer
   * counts.
   */
  stream?: { replyId: string; idleMs: number; sharedReserve: number };
}

export type TakeMode = "wait" | "try";

/**
 * A final's chat, as the account's list of busy chats (every taker's) sees it. A `busy` chat (more
 * of its replies queued behind this one) is listed, and stays listed for `idleMs` after it last
 * asked or after its own chat's budget, having refused it, opens again; its `last` call takes it
 * off. A `quiet` chat leaves a call of each account budget to every listed chat that may be back
 * any moment (not waiting for its own chat's budget): a busy chat's next call comes a round trip
 * after this one's answer, and by then the finals queued meanwhile would have filled the budget.
 */
export interface ChatNote {
  chat: string;
  state: "busy" | "last" | "quiet";
  idleMs: number;
}

export type TakeResult = { taken: true } | { taken: false; waitMs: number; blockedBy: number };

export interface QuotaStore {
  /**
   * Takes `cost` calls from every slot, or none. `wait` (finals) may use a budget to its limit,
   * but for the calls `chat` leaves to busy chats; `try` (drafts, typing) only down to its reserve. Refused: the index of the slot that stands in
   * the way longest and how long until it has room. A cost over a budget's limit takes the whole budget.
   * `aheadMs`: the calls are counted from that long after now, when the taker will send them (its
   * event loop is behind), so every other taker counts them as long as the platform will.
   */
  take(slots: readonly QuotaSlot[], cost: number, mode: TakeMode, token?: string, aheadMs?: number, chat?: ChatNote): Promise<TakeResult>;
  /**
   * The platform answered the calls taken under `token`: they count from now (or `agoMs` before
   * now), not from the take.
   * A call is counted by the platform when it arrives, which may be long after it was taken (a
   * loaded event loop, a slow network); counted from its answer, the next call cannot arrive
   * inside its window; those that aged out of the window meanwhile count again. Never moves a
   * call back in time (a closed budget's wait stands). Only for a token whose take succeeded.
   */
  answered(slots: readonly QuotaSlot[], token: string, cost: number, agoMs?: number): Promise<void>;
  /** A 429 said the budget is spent: nothing more may be taken from it for `forMs`, by anyone. */
  close(slot: QuotaSlot, forMs: number): Promise<void>;
  /** Calls in the slot's current window. */
  used(slot: QuotaSlot): Promise<number>;
}

/**
 * How soon a final refused only for the calls kept for busy chats asks again: a busy chat held
 * back by its own chat's budget gives its call back at once, long before the oldest call ages out.
 */
const HOLD_RETRY_MS = 50;

/**
 * How long until a budget has room for a take `excess` calls over it: until the `excess`-th oldest
 * call has aged out of the window, or, when only the calls kept for busy chats stand in the way
 * (`onlyHeld`), soon, for they may be given back.
 */
function roomInMs(slot: QuotaSlot, log: ReadonlyArray<{ at: number }>, excess: number, onlyHeld: boolean, at: number): number {
  const waitMs = excess > log.length ? slot.windowMs : Math.max(1, log[excess - 1]!.at + slot.windowMs - at);
  return onlyHeld ? Math.min(waitMs, HOLD_RETRY_MS) : waitMs;
}

/** The account's busy chats in one process (ChatNote), with when each may be back for its budgets. */
class BusyList {
  private readonly readyAt = new Map<string, number>();

  /** Lists or unlists the final's chat; the calls of each account budget it must leave to busy chats. */
  note(chat: ChatNote, at: number): number {
    for (const [key, readyAt] of this.readyAt) if (readyAt <= at - chat.idleMs) this.readyAt.delete(key);
    if (chat.state === "busy") this.readyAt.set(chat.chat, Math.max(at, this.readyAt.get(chat.chat) ?? at));
    if (chat.state === "last") this.readyAt.delete(chat.chat);
    if (chat.state !== "quiet") return 0;
    let held = 0;
    for (const [key, readyAt] of this.readyAt) if (key !== chat.chat && readyAt <= at) held += 1;
    return held;
  }

  /** A listed chat's own budget holds it back until `readyAt`. */
  heldBack(chat: string, readyAt: number): void {
    if (this.readyAt.has(chat)) this.readyAt.set(chat, readyAt);
  }
}

/** Budgets of one process. */
export function createMemoryQuotaStore(options: { now?: () => number } = {}): QuotaStore {
  const now = options.now ?? Date.now;
  /** Per key: its calls, oldest first (a closed budget's filler may lie in the future). */
  const logs = new Map<string, Array<{ at: number; token?: string }>>();
  /** Per key: the replies streaming into it, with when each was last seen. */
  const streams = new Map<string, Map<string, number>>();
  const busyChats = new BusyList();

  /** Counts the try's reply as streaming into the slot; the reserve the try must leave. */
  const reserveOf = (slot: QuotaSlot, at: number): number => {
    if (!slot.stream) return slot.reserve;
    let replies = streams.get(slot.key);
    if (!replies) streams.set(slot.key, (replies = new Map()));
    for (const [id, seen] of replies) if (seen <= at - slot.stream.idleMs) replies.delete(id);
    replies.set(slot.stream.replyId, at);
    if (slot.stream.sharedReserve < 0) return Math.max(slot.reserve, Math.min(slot.limit, replies.size));
    return replies.size > 1 ? Math.max(slot.reserve, slot.stream.sharedReserve) : slot.reserve;
  };
  const byTime = (a: { at: number }, b: { at: number }) => a.at - b.at;

  const current = (slot: QuotaSlot, at: number) => {
    const log = logs.get(slot.key) ?? [];
    let expired = 0;
    while (expired < log.length && log[expired]!.at <= at - slot.windowMs) expired += 1;
    if (expired > 0) log.splice(0, expired);
    if (log.length === 0) logs.delete(slot.key);
    return log;
  };

  return {
    async take(slots, cost, mode, token, aheadMs = 0, chat) {
      const at = now();
      const stamp = at + aheadMs;
      const held = mode === "wait" && chat ? busyChats.note(chat, at) : 0;
      let refused: { waitMs: number; blockedBy: number } | undefined;
      slots.forEach((slot, index) => {
        const log = current(slot, at);
        const allowed = slot.limit - (mode === "try" ? reserveOf(slot, at) : slot.account ? Math.min(held, slot.limit - 1) : 0);
        // A call that makes more platform calls than a budget allows at all takes the whole budget.
        const excess = log.length + Math.min(cost, slot.limit) - allowed;
        if (excess <= 0) return;
        const waitMs = roomInMs(slot, log, excess, mode === "wait" && log.length + Math.min(cost, slot.limit) <= slot.limit, at);
        if (!refused || waitMs > refused.waitMs) refused = { waitMs, blockedBy: index };
      });
      if (refused) {
        // Held back by its own chat's budget: a busy chat needs nothing of the account's until then.
        const blocking = slots[refused.blockedBy]!;
        if (chat?.state === "busy" && !blocking.account) busyChats.heldBack(chat.chat, at + refused.waitMs);
        return { taken: false, ...refused };
      }
      for (const slot of slots) {
        const log = logs.get(slot.key) ?? [];
        const taken = Math.min(cost, slot.limit);
        for (let count = 0; count < taken; count++) log.push(token === undefined ? { at: stamp } : { at: stamp, token });
        // A closed budget's filler, or a call counted ahead, may lie later: keep the log in time order.
        if (log.length > taken && log[log.length - taken - 1]!.at > stamp) log.sort(byTime);
        logs.set(slot.key, log);
      }
      return { taken: true };
    },
    async answered(slots, token, cost, agoMs = 0) {
      const at = now() - Math.max(0, agoMs);
      for (const slot of slots) {
        const log = current(slot, at);
        let found = 0;
        for (const entry of log) {
          if (entry.token !== token) continue;
          found += 1;
          entry.at = Math.max(entry.at, at);
        }
        // Aged out of the window before the answer came: the platform counted them on arrival.
        for (let missing = Math.min(cost, slot.limit) - found; missing > 0; missing--) log.push({ at, token });
        log.sort(byTime);
        logs.set(slot.key, log);
      }
    },
    async close(slot, forMs) {
      const at = now();
      const log = current(slot, at);
      // Filled to the limit with calls that age out when the wait is over.
      const filler = at + forMs - slot.windowMs;
      while (log.length < slot.limit) log.push({ at: filler });
      for (const entry of log) entry.at = Math.max(entry.at, filler);
      log.sort(byTime);
      logs.set(slot.key, log);
    },
    async used(slot) {
      return current(slot, now()).length;
    },
  };
}
