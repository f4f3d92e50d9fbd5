import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BudgetLedger } from "../../src/store/budget-ledger.js";
import { createMemoryBudgetLedger } from "../../src/store/memory-budget-ledger.js";
import { createRedisBudgetLedger } from "../../src/store/redis-budget-ledger.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runBudgetLedgerSuite } from "./budget-ledger.suite.js";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

runBudgetLedgerSuite("one process", async () => {
  const ledger = createMemoryBudgetLedger();
  return { open: async () => ledger, cleanup: () => ledger.close() };
});

runBudgetLedgerSuite("Redis", async () => {
  const prefix = `countbot-test-${randomUUID()}`;
  const connections: Redis[] = [];
  const ledgers: BudgetLedger[] = [];
  return {
    // Each ledger on its own connection, as separate workers would have.
    open: async () => {
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      connections.push(connection);
      const ledger = createRedisBudgetLedger({ redis: connection, prefix });
      ledgers.push(ledger);
      return ledger;
    },
    cleanup: async () => {
      await Promise.all(ledgers.map((ledger) => ledger.close()));
      await Promise.all(connections.map((connection) => connection.quit()));
      await deleteKeys(redis, prefix);
    },
  };
});

describe("one-process ledger with a file", () => {
  it("keeps what was spent and the usage report across a restart, but not reservations", async () => {
    const directory = await mkdtemp(path.join(os.tmpdir(), "countbot-ledger-"));
    try {
      const file = path.join(directory, "budgets.json");
      const now = Date.UTC(2026, 0, 5, 10);
      const person = { scope: "person:web:ada", unit: "tokens" as const, limit: 1_000, from: Date.UTC(2026, 0, 5), bucket: Date.UTC(2026, 0, 5), keepMs: 86_400_000 };
      const first = createMemoryBudgetLedger({ file, writeDelayMs: 0 });
      await first.reserve({ id: "open", budgets: [person], amounts: [500], ttlMs: 60_000, now });
      await first.settle({ id: "done", budgets: [person], reserved: [0], used: [300], now, usage: { day: "2026-01-05", counts: new Map([["calls", 1]]), keepMs: 86_400_000 } });
      await first.close();
      const second = createMemoryBudgetLedger({ file });
      expect(await second.read([person], now)).toEqual([{ used: 300, held: 0, oldestBucket: Date.UTC(2026, 0, 5) }]);
      expect(await second.usage(["2026-01-05"])).toEqual({ calls: 1 });
      await second.close();
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe("Redis ledger", () => {
  it("keeps every key under {prefix}:budget and {prefix}:usage, with an expiry; a settled call leaves no hold behind", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    try {
      const ledger = createRedisBudgetLedger({ redis, prefix });
      const now = Date.now();
      const person = { scope: "person:web:ada", unit: "tokens" as const, limit: 1_000, from: now - 1_000, bucket: now - 1_000, keepMs: 86_400_000 };
      await ledger.reserve({ id: "c1", budgets: [person], amounts: [500], ttlMs: 60_000, now });
      expect(await redis.pttl(`{${prefix}}:budget:tokens:person:web:ada:held`)).toBeGreaterThan(0);
      await ledger.settle({ id: "c1", budgets: [person], reserved: [500], used: [300], now, usage: { day: "2026-01-05", counts: new Map([["calls", 1]]), keepMs: 86_400_000 } });
      await ledger.close();
      const keys = (await redis.keys(`{${prefix}}*`)).sort();
      expect(keys).toEqual([`{${prefix}}:budget:tokens:person:web:ada`, `{${prefix}}:usage:2026-01-05`]);
      for (const key of keys) expect(await redis.pttl(key)).toBeGreaterThan(0);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });
});

describe("Redis ledger: the usage report's counts, summed in the process", () => {
  const call = (id: string, day: string, counts: Record<string, number>) => ({ id, budgets: [], reserved: [], used: [], now: Date.now(), usage: { day, counts: new Map(Object.entries(counts)), keepMs: 86_400_000 } });

  /** The connection, counting the scripts run through it; `failNext` makes the next script call fail. */
  function countingRedis() {
    const counter = { scripts: 0, failNext: false };
    const proxy = new Proxy(redis, {
      get(target, property, receiver) {
        if (property === "evalsha" || property === "eval") {
          return (...args: unknown[]) => {
            counter.scripts += 1;
            if (counter.failNext) {
              counter.failNext = false;
              return Promise.reject(new Error("connection lost"));
            }
            return (target[property] as (...rest: unknown[]) => Promise<unknown>).apply(target, args);
          };
        }
        return Reflect.get(target, property, receiver);
      },
    });
    return { proxy, counter };
  }

  it("writes many calls' counts of a day in one script call, at the flush, summed field by field", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    const { proxy, counter } = countingRedis();
    const ledger = createRedisBudgetLedger({ redis: proxy, prefix, usageFlushMs: 600_000 });
    try {
      for (let index = 0; index < 50; index++) await ledger.settle(call(`c${index}`, "2026-01-05", { calls: 1, [`chat\u001fweb:${index % 2}\u001fm\u001finput`]: 10 }));
      expect(counter.scripts).toBe(0);
      expect(await redis.exists(`{${prefix}}:usage:2026-01-05`)).toBe(0);
      await ledger.flushUsage();
      expect(counter.scripts).toBe(1);
      expect(await redis.hgetall(`{${prefix}}:usage:2026-01-05`)).toEqual({ calls: "50", "chat\u001fweb:0\u001fm\u001finput": "250", "chat\u001fweb:1\u001fm\u001finput": "250" });
      expect(await redis.pttl(`{${prefix}}:usage:2026-01-05`)).toBeGreaterThan(0);
      // Nothing pending: a second flush writes nothing.
      await ledger.flushUsage();
      expect(counter.scripts).toBe(1);
    } finally {
      await ledger.close();
      await deleteKeys(redis, prefix);
    }
  });

  it("flushes by itself after usageFlushMs, reads its own calls at once, and writes the rest at close", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    const writer = createRedisBudgetLedger({ redis, prefix, usageFlushMs: 10 });
    const reader = createRedisBudgetLedger({ redis, prefix, usageFlushMs: 600_000 });
    try {
      await writer.settle(call("a", "2026-01-05", { calls: 1 }));
      // Another process's reader: polls until the writer's timer has flushed.
      for (let tries = 0; (await reader.usage(["2026-01-05"])).calls !== 1; tries++) {
        if (tries > 10_000) throw new Error("the writer never flushed by itself");
        await new Promise((resolve) => setImmediate(resolve));
      }
      // The reader's own call is in its report before any flush of its own.
      await reader.settle(call("b", "2026-01-05", { calls: 1 }));
      expect(await reader.usage(["2026-01-05"])).toEqual({ calls: 2 });
      await writer.settle(call("c", "2026-01-06", { calls: 1 }));
      await writer.close();
      expect(await redis.hgetall(`{${prefix}}:usage:2026-01-06`)).toEqual({ calls: "1" });
    } finally {
      await Promise.all([writer.close(), reader.close()]);
      await deleteKeys(redis, prefix);
    }
  });

  it("keeps the counts of a flush that failed for the next one", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    const { proxy, counter } = countingRedis();
    const errors: unknown[] = [];
    const ledger = createRedisBudgetLedger({ redis: proxy, prefix, usageFlushMs: 600_000, onError: (error) => errors.push(error) });
    try {
      await ledger.settle(call("a", "2026-01-05", { calls: 1 }));
      counter.failNext = true;
      await ledger.flushUsage();
      expect(errors).toHaveLength(1);
      expect(await redis.exists(`{${prefix}}:usage:2026-01-05`)).toBe(0);
      await ledger.settle(call("b", "2026-01-05", { calls: 1 }));
      await ledger.flushUsage();
      expect(await redis.hgetall(`{${prefix}}:usage:2026-01-05`)).toEqual({ calls: "2" });
    } finally {
      await ledger.close();
      await deleteKeys(redis, prefix);
    }
  });
});
