/**
 * The QuotaStore conformance suite: the in-process store and the Redis one run it unchanged. Each
 * `open` is another gateway over the same budgets (for Redis a connection of its own; in memory the
 * same process's store), all judged by one hand-moved clock.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ChatNote, QuotaSlot, QuotaStore } from "../../src/gateway/quota-store.js";

export interface QuotaStoreHarness {
  open(): Promise<QuotaStore>;
  /** Moves the shared clock. */
  advance(ms: number): void;
  cleanup(): Promise<void>;
}

const chat: QuotaSlot = { key: "chat:1", limit: 5, windowMs: 5_000, reserve: 2 };
const bot: QuotaSlot = { key: "bot", limit: 3, windowMs: 1_000, reserve: 1 };

export function runQuotaStoreSuite(name: string, makeHarness: () => Promise<QuotaStoreHarness>): void {
  describe(`QuotaStore conformance: ${name}`, () => {
    const harnesses: QuotaStoreHarness[] = [];
    const start = async () => {
      const harness = await makeHarness();
      harnesses.push(harness);
      return harness;
    };
    afterEach(async () => {
      for (const harness of harnesses.splice(0)) await harness.cleanup();
    });

    it("lets a burst of the limit through, then says how long until the oldest call ages out", async () => {
      const harness = await start();
      const store = await harness.open();
      for (let call = 0; call < 5; call++) {
        expect(await store.take([chat], 1, "wait")).toEqual({ taken: true });
        harness.advance(100);
      }
      // Calls at 0, 100, …, 400; now 500: the first leaves the window at 5,000.
      expect(await store.take([chat], 1, "wait")).toEqual({ taken: false, waitMs: 4_500, blockedBy: 0 });
      harness.advance(4_499);
      expect((await store.take([chat], 1, "wait")).taken).toBe(false);
      harness.advance(1);
      expect(await store.take([chat], 1, "wait")).toEqual({ taken: true });
      expect(await store.used(chat)).toBe(5);
    });

    it("takes from every budget or from none, naming the one that stands in the way longest", async () => {
      const harness = await start();
      const store = await harness.open();
      const otherChat: QuotaSlot = { ...chat, key: "chat:2" };
      for (let call = 0; call < 3; call++) expect((await store.take([chat, bot], 1, "wait")).taken).toBe(true);
      const refused = await store.take([otherChat, bot], 1, "wait");
      expect(refused).toEqual({ taken: false, waitMs: 1_000, blockedBy: 1 });
      // Nothing was taken from the chat that had room.
      expect(await store.used(otherChat)).toBe(0);
      expect(await store.used(chat)).toBe(3);
      harness.advance(1_000);
      expect((await store.take([otherChat, bot], 2, "wait")).taken).toBe(true);
      expect(await store.used(otherChat)).toBe(2);
    });

    it("leaves the reserve to finals: a try stops where a wait goes on", async () => {
      const harness = await start();
      const store = await harness.open();
      expect((await store.take([chat], 1, "try")).taken).toBe(true);
      expect((await store.take([chat], 1, "try")).taken).toBe(true);
      expect((await store.take([chat], 1, "try")).taken).toBe(true);
      expect((await store.take([chat], 1, "try")).taken).toBe(false);
      expect((await store.take([chat], 2, "wait")).taken).toBe(true);
      expect((await store.take([chat], 1, "wait")).taken).toBe(false);
    });

    it("lets a call that makes more calls than a budget allows take the whole budget, not wait for ever", async () => {
      const harness = await start();
      const store = await harness.open();
      expect((await store.take([bot], 7, "wait")).taken).toBe(true);
      expect(await store.used(bot)).toBe(3);
      expect(await store.take([bot], 7, "wait")).toEqual({ taken: false, waitMs: 1_000, blockedBy: 0 });
    });

    it("two gateways share one window: together they never go over it", async () => {
      const harness = await start();
      const [first, second] = [await harness.open(), await harness.open()];
      const outcomes = await Promise.all(Array.from({ length: 20 }, (_, index) => (index % 2 === 0 ? first : second).take([bot], 1, "wait")));
      expect(outcomes.filter((outcome) => outcome.taken)).toHaveLength(3);
      expect(await first.used(bot)).toBe(3);
      expect(await second.used(bot)).toBe(3);
    });

    it("counts a call from when the platform answered it, when that was late: the next waits a window from the answer", async () => {
      const harness = await start();
      const [first, second] = [await harness.open(), await harness.open()];
      const single: QuotaSlot = { key: "chat:9", limit: 1, windowMs: 1_000, reserve: 0 };
      expect((await first.take([single, bot], 1, "wait", "slow-send")).taken).toBe(true);
      // The call reached the platform late (a loaded event loop, a slow network): answered 800 ms on.
      harness.advance(800);
      await first.answered([single, bot], "slow-send", 1);
      harness.advance(200);
      // Taken a window ago, but answered 200 ms ago: still in both budgets.
      expect(await second.used(bot)).toBe(1);
      expect(await second.take([single], 1, "wait")).toEqual({ taken: false, waitMs: 800, blockedBy: 0 });
      harness.advance(800);
      expect((await second.take([single], 1, "wait")).taken).toBe(true);
      expect(await second.used(single)).toBe(1);
    });

    it("counts a call answered after it aged out of the window again, from its answer", async () => {
      const harness = await start();
      const [first, second] = [await harness.open(), await harness.open()];
      const single: QuotaSlot = { key: "chat:8", limit: 1, windowMs: 1_000, reserve: 0 };
      expect((await first.take([single], 1, "wait", "very-slow")).taken).toBe(true);
      harness.advance(1_500);
      expect((await second.take([single], 1, "wait", "other")).taken).toBe(true); // the first had aged out
      harness.advance(100);
      await first.answered([single], "very-slow", 1);
      // Both count now: the platform saw both within its window.
      expect(await second.used(single)).toBe(2);
      expect(await second.take([single], 1, "wait")).toEqual({ taken: false, waitMs: 1_000, blockedBy: 0 });
    });

    it("counts a call taken ahead (its taker's event loop behind) from then, for every taker", async () => {
      const harness = await start();
      const [first, second] = [await harness.open(), await harness.open()];
      const single: QuotaSlot = { key: "chat:7", limit: 1, windowMs: 1_000, reserve: 0 };
      expect((await first.take([single], 1, "wait", "behind", 300)).taken).toBe(true);
      harness.advance(1_000);
      expect(await second.take([single], 1, "wait")).toEqual({ taken: false, waitMs: 300, blockedBy: 0 });
      harness.advance(300);
      expect((await second.take([single], 1, "wait")).taken).toBe(true);
    });

    it("counts the replies streaming into a budget across takers: with two, a try leaves the shared reserve; alone, or once the other idled out, the usual one", async () => {
      const harness = await start();
      const [first, second] = [await harness.open(), await harness.open()];
      const group = (replyId: string): QuotaSlot => ({ key: "group:-5", limit: 20, windowMs: 60_000, reserve: 10, stream: { replyId, idleMs: 15_000, sharedReserve: 20 } });
      // One taker's reply, counted without taking anything (its first draft settling).
      expect((await first.take([group("r1")], 0, "try")).taken).toBe(true);
      expect(await first.used(group("r1"))).toBe(0);
      // The other taker sees only its own reply, but two stream into the budget: the whole of it is kept.
      expect(await second.take([group("r2")], 1, "try")).toEqual({ taken: false, waitMs: 60_000, blockedBy: 0 });
      expect((await second.take([group("r2")], 1, "wait")).taken).toBe(true); // finals are not held back
      harness.advance(15_000);
      // r1 went quiet: r2 streams alone and takes from the other half.
      expect((await second.take([group("r2")], 1, "try")).taken).toBe(true);
    });

    it("keeps a short window's call for each reply streaming into it, every taker's: a try leaves as many as stream", async () => {
      const harness = await start();
      const [first, second] = [await harness.open(), await harness.open()];
      const channel = (replyId: string): QuotaSlot => ({ key: "channel:9", limit: 5, windowMs: 5_000, reserve: 2, stream: { replyId, idleMs: 15_000, sharedReserve: -1 } });
      for (const reply of ["r1", "r2", "r3"]) expect((await first.take([channel(reply)], 0, "try")).taken).toBe(true);
      expect((await second.take([channel("r4")], 0, "try")).taken).toBe(true);
      // Four stream (three of them seen only by the other taker): one call is left for drafts.
      expect((await second.take([channel("r4")], 1, "try")).taken).toBe(true);
      expect((await second.take([channel("r4")], 1, "try")).taken).toBe(false);
      expect((await first.take([channel("r1")], 1, "try")).taken).toBe(false);
      expect((await second.take([channel("r4")], 4, "wait")).taken).toBe(true); // the four finals
      expect(await first.used(channel("r1"))).toBe(5);
    });

    it("keeps a call of an account budget for each busy chat, every taker's, unless its own chat's budget holds it back", async () => {
      const harness = await start();
      const [first, second] = [await harness.open(), await harness.open()];
      const account: QuotaSlot = { key: "bot", limit: 3, windowMs: 1_000, reserve: 1, account: true };
      const groupChat: QuotaSlot = { key: "chat:g", limit: 2, windowMs: 5_000, reserve: 0 };
      const note = (chat: string, state: ChatNote["state"]): ChatNote => ({ chat, state, idleMs: 1_000 });
      const group = (state: ChatNote["state"]) => first.take([groupChat, account], 1, "wait", undefined, 0, note("g", state));
      const single = (chat: string) => second.take([account], 1, "wait", undefined, 0, note(chat, "quiet"));
      expect((await group("busy")).taken).toBe(true);
      expect((await single("p1")).taken).toBe(true);
      // The last call of the second is the busy group's, though another taker listed it; it may
      // be given back any moment (the group held back by its own budget): ask again soon.
      expect(await single("p2")).toEqual({ taken: false, waitMs: 50, blockedBy: 0 });
      expect((await group("busy")).taken).toBe(true);
      harness.advance(1_000);
      // The group's own budget (2 per 5 s) holds it back 4 s: it needs nothing of the account's meanwhile.
      expect(await group("busy")).toEqual({ taken: false, waitMs: 4_000, blockedBy: 0 });
      for (const chat of ["p3", "p4", "p5"]) expect((await single(chat)).taken).toBe(true);
      harness.advance(4_000);
      // Back: a call is kept for it again, until its last call takes it off the list.
      expect((await single("p6")).taken).toBe(true);
      expect((await single("p7")).taken).toBe(true);
      expect((await single("p8")).taken).toBe(false);
      expect((await group("last")).taken).toBe(true);
      harness.advance(1_000);
      for (const chat of ["p9", "p10", "p11"]) expect((await single(chat)).taken).toBe(true);
    });

    it("forgets a busy chat that did not come back within its idle time", async () => {
      const harness = await start();
      const store = await harness.open();
      const account: QuotaSlot = { key: "bot", limit: 2, windowMs: 1_000, reserve: 1, account: true };
      expect((await store.take([account], 1, "wait", undefined, 0, { chat: "g", state: "busy", idleMs: 1_000 })).taken).toBe(true);
      expect((await store.take([account], 1, "wait", undefined, 0, { chat: "p1", state: "quiet", idleMs: 1_000 })).taken).toBe(false);
      harness.advance(1_000);
      for (const chat of ["p2", "p3"]) expect((await store.take([account], 1, "wait", undefined, 0, { chat, state: "quiet", idleMs: 1_000 })).taken).toBe(true);
    });

    it("never moves a call back in time, nor out of a closed budget's wait", async () => {
      const harness = await start();
      const store = await harness.open();
      expect((await store.take([chat], 1, "wait", "closed-send")).taken).toBe(true);
      await store.close(chat, 8_000);
      harness.advance(500);
      await store.answered([chat], "closed-send", 1);
      harness.advance(7_499);
      expect((await store.take([chat], 1, "wait")).taken).toBe(false);
      harness.advance(1);
      expect((await store.take([chat], 1, "wait")).taken).toBe(true);
    });

    it("a closed budget takes nothing from anyone until the wait is over, then fills again", async () => {
      const harness = await start();
      const [first, second] = [await harness.open(), await harness.open()];
      expect((await first.take([chat], 1, "wait")).taken).toBe(true);
      await first.close(chat, 8_000);
      const refused = await second.take([chat], 1, "wait");
      expect(refused).toEqual({ taken: false, waitMs: 8_000, blockedBy: 0 });
      harness.advance(7_999);
      expect((await second.take([chat], 1, "wait")).taken).toBe(false);
      harness.advance(1);
      for (let call = 0; call < 5; call++) expect((await second.take([chat], 1, "wait")).taken).toBe(true);
      expect((await first.take([chat], 1, "wait")).taken).toBe(false);
    });
  });
}
