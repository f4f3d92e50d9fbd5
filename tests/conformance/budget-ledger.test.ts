import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
  return {
    // Each ledger on its own connection, as separate workers would have.
    open: async () => {
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      connections.push(connection);
      return createRedisBudgetLedger({ redis: connection, prefix });
    },
    cleanup: async () => {
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
      await first.settle({ id: "done", budgets: [person], reserved: [0], used: [300], now, usage: { day: "2026-01-05", counts: { calls: 1 }, keepMs: 86_400_000 } });
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
      await ledger.settle({ id: "c1", budgets: [person], reserved: [500], used: [300], now, usage: { day: "2026-01-05", counts: { calls: 1 }, keepMs: 86_400_000 } });
      const keys = (await redis.keys(`{${prefix}}*`)).sort();
      expect(keys).toEqual([`{${prefix}}:budget:tokens:person:web:ada`, `{${prefix}}:usage:2026-01-05`]);
      for (const key of keys) expect(await redis.pttl(key)).toBeGreaterThan(0);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });
});
