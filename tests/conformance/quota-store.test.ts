import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryQuotaStore } from "../../src/gateway/quota-store.js";
import { createRedisQuotaStore, quotaTag } from "../../src/gateway/redis-quota-store.js";
import { redisUrl } from "../support/redis.js";
import { runQuotaStoreSuite } from "./quota-store.suite.js";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

/** Deletes the budgets of every account under `prefix`. */
async function deleteQuotaKeys(prefix: string): Promise<void> {
  const keys = await redis.keys(`{${prefix}:quota:*`);
  if (keys.length > 0) await redis.del(...keys);
}

runQuotaStoreSuite("in this process", async () => {
  let clock = 1_000_000;
  const store = createMemoryQuotaStore({ now: () => clock });
  return { open: async () => store, advance: (ms) => void (clock += ms), cleanup: async () => undefined };
});

runQuotaStoreSuite("Redis", async () => {
  const prefix = `countbot-test-${randomUUID()}`;
  let clock = 1_000_000;
  const connections: Redis[] = [];
  return {
    open: async () => {
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      connections.push(connection);
      return createRedisQuotaStore({ redis: connection, prefix, channel: "telegram", account: "ab12", now: () => clock });
    },
    advance: (ms) => void (clock += ms),
    cleanup: async () => {
      await Promise.all(connections.map((connection) => connection.quit()));
      await deleteQuotaKeys(prefix);
    },
  };
});

describe("Redis quota store", () => {
  it("keeps an account's budgets under its own hash tag, expiring once their calls aged out", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    try {
      const store = createRedisQuotaStore({ redis, prefix, channel: "telegram", account: "ab12" });
      await store.take([{ key: "chat:-100", limit: 20, windowMs: 60_000, reserve: 10 }, { key: "bot", limit: 30, windowMs: 1_000, reserve: 15 }], 1, "wait");
      const tag = quotaTag(prefix, "telegram", "ab12");
      expect(tag).toBe(`{${prefix}:quota:telegram:ab12}`);
      expect((await redis.keys(`{${prefix}:*`)).sort()).toEqual([`${tag}:bot`, `${tag}:chat:-100`]);
      const ttl = await redis.pttl(`${tag}:chat:-100`);
      expect(ttl).toBeGreaterThan(59_000);
      expect(ttl).toBeLessThanOrEqual(61_000);
      expect(await redis.pttl(`${tag}:bot`)).toBeLessThanOrEqual(2_000);
    } finally {
      await deleteQuotaKeys(prefix);
    }
  });
});
