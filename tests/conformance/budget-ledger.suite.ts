/**
 * The BudgetLedger conformance suite: the one-process ledger and Redis run it unchanged. `open`
 * gives another ledger over the same storage, as another worker would have (for the memory
 * ledger: the same process's).
 */
import { afterEach, describe, expect, it } from "vitest";
import type { BudgetLedger, BudgetWindow } from "../../src/store/budget-ledger.js";

export interface BudgetLedgerHarness {
  open(): Promise<BudgetLedger>;
  cleanup(): Promise<void>;
}

const DAY = 24 * 60 * 60 * 1000;
const T0 = Date.UTC(2026, 0, 5, 10);
const startOfDay = Date.UTC(2026, 0, 5);

function budget(scope: string, limit: number, overrides: Partial<BudgetWindow> = {}): BudgetWindow {
  return { scope, unit: "tokens", limit, from: startOfDay, bucket: startOfDay, keepMs: 2 * DAY, ...overrides };
}

export function runBudgetLedgerSuite(name: string, makeHarness: () => Promise<BudgetLedgerHarness>): void {
  describe(`BudgetLedger conformance: ${name}`, () => {
    const harnesses: BudgetLedgerHarness[] = [];
    const start = async () => {
      const harness = await makeHarness();
      harnesses.push(harness);
      return harness;
    };
    afterEach(async () => {
      for (const harness of harnesses.splice(0)) await harness.cleanup();
    });

    it("grants while used plus held is below the limit, and holds the amount until settled", async () => {
      const ledger = await (await start()).open();
      const person = budget("person:web:ada", 10_000);
      expect(await ledger.reserve({ id: "c1", budgets: [person], amounts: [6_000], ttlMs: 60_000, now: T0 })).toEqual({ granted: true });
      expect(await ledger.read([person], T0)).toEqual([{ used: 0, held: 6_000 }]);
      expect(await ledger.reserve({ id: "c2", budgets: [person], amounts: [6_000], ttlMs: 60_000, now: T0 })).toEqual({ granted: true });
      // 12,000 held: nothing more until they settle.
      expect(await ledger.reserve({ id: "c3", budgets: [person], amounts: [10], ttlMs: 60_000, now: T0 })).toEqual({ granted: false, states: [{ used: 0, held: 12_000 }] });
      expect(await ledger.settle({ id: "c1", budgets: [person], reserved: [6_000], used: [1_500], now: T0 })).toEqual([{ used: 1_500, held: 6_000, oldestBucket: startOfDay }]);
      expect(await ledger.settle({ id: "c2", budgets: [person], reserved: [6_000], used: [1_500], now: T0 })).toEqual([{ used: 3_000, held: 0, oldestBucket: startOfDay }]);
      expect(await ledger.reserve({ id: "c3", budgets: [person], amounts: [6_000], ttlMs: 60_000, now: T0 })).toEqual({ granted: true });
    });

    it("reserves all budgets or none: one without room leaves the others untouched", async () => {
      const ledger = await (await start()).open();
      const person = budget("person:web:ada", 10_000);
      const chat = budget("chat:web:a", 1_000);
      await ledger.settle({ id: "spent", budgets: [chat], reserved: [0], used: [1_000], now: T0 });
      const outcome = await ledger.reserve({ id: "c1", budgets: [person, chat], amounts: [500, 500], ttlMs: 60_000, now: T0 });
      expect(outcome).toEqual({ granted: false, states: [{ used: 0, held: 0 }, { used: 1_000, held: 0, oldestBucket: startOfDay }] });
      expect(await ledger.read([person], T0)).toEqual([{ used: 0, held: 0 }]);
    });

    it("keeps budgets of different units and scopes apart", async () => {
      const ledger = await (await start()).open();
      const tokens = budget("deployment", 100);
      const money = budget("deployment", 100, { unit: "money" });
      await ledger.settle({ id: "c1", budgets: [tokens, money], reserved: [0, 0], used: [40, 7], now: T0 });
      expect(await ledger.read([tokens, money, budget("person:web:bob", 100)], T0)).toEqual([
        { used: 40, held: 0, oldestBucket: startOfDay },
        { used: 7, held: 0, oldestBucket: startOfDay },
        { used: 0, held: 0 },
      ]);
    });

    it("never grants past the limit by more than one call, whatever the number of calls at once over several ledgers", async () => {
      const harness = await start();
      const ledgers = await Promise.all([harness.open(), harness.open()]);
      const person = budget("person:web:ada", 10_000);
      const outcomes = await Promise.all(
        Array.from({ length: 40 }, (_, index) => ledgers[index % 2]!.reserve({ id: `c${index}`, budgets: [person], amounts: [1_500], ttlMs: 60_000, now: T0 })),
      );
      // Granted while used + held < 10,000: the seventh takes it to 10,500, the eighth finds no room.
      expect(outcomes.filter((outcome) => outcome.granted)).toHaveLength(7);
      expect(await ledgers[0]!.read([person], T0)).toEqual([{ used: 0, held: 10_500 }]);
    });

    it("releases a reservation nobody extended or settled once it expired (a crashed worker's)", async () => {
      const ledger = await (await start()).open();
      const person = budget("person:web:ada", 1_000);
      expect((await ledger.reserve({ id: "crashed", budgets: [person], amounts: [1_000], ttlMs: 5_000, now: T0 })).granted).toBe(true);
      expect((await ledger.reserve({ id: "next", budgets: [person], amounts: [100], ttlMs: 5_000, now: T0 + 4_999 })).granted).toBe(false);
      expect(await ledger.read([person], T0 + 5_000)).toEqual([{ used: 0, held: 0 }]);
      expect((await ledger.reserve({ id: "next", budgets: [person], amounts: [100], ttlMs: 5_000, now: T0 + 5_000 })).granted).toBe(true);
    });

    it("keeps an extended reservation past its first expiry, and does not revive a released one", async () => {
      const ledger = await (await start()).open();
      const person = budget("person:web:ada", 1_000);
      await ledger.reserve({ id: "long", budgets: [person], amounts: [700], ttlMs: 5_000, now: T0 });
      expect(await ledger.extend({ id: "long", budgets: [person], amounts: [700], ttlMs: 5_000, now: T0 + 4_000 })).toBe(true);
      expect(await ledger.read([person], T0 + 8_000)).toEqual([{ used: 0, held: 700 }]);
      expect(await ledger.read([person], T0 + 9_000)).toEqual([{ used: 0, held: 0 }]);
      expect(await ledger.extend({ id: "long", budgets: [person], amounts: [700], ttlMs: 5_000, now: T0 + 9_001 })).toBe(false);
    });

    it("adds what an expired reservation's call used when it settles late, and gives nothing back twice", async () => {
      const ledger = await (await start()).open();
      const person = budget("person:web:ada", 10_000);
      await ledger.reserve({ id: "slow", budgets: [person], amounts: [3_000], ttlMs: 5_000, now: T0 });
      await ledger.reserve({ id: "other", budgets: [person], amounts: [2_000], ttlMs: 60_000, now: T0 + 6_000 });
      expect(await ledger.settle({ id: "slow", budgets: [person], reserved: [3_000], used: [1_200], now: T0 + 7_000 })).toEqual([{ used: 1_200, held: 2_000, oldestBucket: startOfDay }]);
    });

    it("counts only use inside the window: a new day starts from nothing, a rolling window frees its oldest bucket", async () => {
      const ledger = await (await start()).open();
      await ledger.settle({ id: "c1", budgets: [budget("person:web:ada", 1_000)], reserved: [0], used: [900], now: T0 });
      const tomorrow = budget("person:web:ada", 1_000, { from: startOfDay + DAY, bucket: startOfDay + DAY });
      expect(await ledger.read([tomorrow], T0 + DAY)).toEqual([{ used: 0, held: 0 }]);

      const hour = 60 * 60 * 1000;
      const rolling = (at: number) => budget("chat:web:a", 1_000, { from: Math.floor(at / hour) * hour - DAY, bucket: Math.floor(at / hour) * hour });
      await ledger.settle({ id: "r1", budgets: [rolling(T0)], reserved: [0], used: [300], now: T0 });
      await ledger.settle({ id: "r2", budgets: [rolling(T0 + 5 * hour)], reserved: [0], used: [200], now: T0 + 5 * hour });
      expect(await ledger.read([rolling(T0 + 5 * hour)], T0 + 5 * hour)).toEqual([{ used: 500, held: 0, oldestBucket: T0 }]);
      expect(await ledger.read([rolling(T0 + DAY + hour)], T0 + DAY + hour)).toEqual([{ used: 200, held: 0, oldestBucket: T0 + 5 * hour }]);
    });

    it("tells once per key until it expires", async () => {
      const ledger = await (await start()).open();
      expect(await ledger.firstNotice("refused:person:web:ada:day", T0 + 1_000, T0)).toBe(true);
      expect(await ledger.firstNotice("refused:person:web:ada:day", T0 + 1_000, T0 + 10)).toBe(false);
      expect(await ledger.firstNotice("refused:person:web:bob:day", T0 + 1_000, T0 + 10)).toBe(true);
    });

    it("sums the usage report's counts over days, as every ledger over the storage sees them", async () => {
      const harness = await start();
      const [first, second] = [await harness.open(), await harness.open()];
      const keep = 10 * DAY;
      await first.settle({ id: "a", budgets: [], reserved: [], used: [], now: T0, usage: { day: "2026-01-05", counts: new Map([["person\u001fweb:ada\u001fopenai/x\u001fin", 100], ["calls", 1]]), keepMs: keep } });
      await second.settle({ id: "b", budgets: [], reserved: [], used: [], now: T0, usage: { day: "2026-01-05", counts: new Map([["person\u001fweb:ada\u001fopenai/x\u001fin", 50], ["calls", 1]]), keepMs: keep } });
      await second.settle({ id: "c", budgets: [], reserved: [], used: [], now: T0 + DAY, usage: { day: "2026-01-06", counts: new Map([["calls", 1]]), keepMs: keep } });
      // Another ledger sees a ledger's counts once it has flushed them (Redis: within 5 seconds by itself).
      await second.flushUsage();
      expect(await first.usage(["2026-01-05"])).toEqual({ "person\u001fweb:ada\u001fopenai/x\u001fin": 150, calls: 2 });
      expect(await second.usage(["2026-01-05", "2026-01-06", "2026-01-07"])).toEqual({ "person\u001fweb:ada\u001fopenai/x\u001fin": 150, calls: 3 });
    });
  });
}
