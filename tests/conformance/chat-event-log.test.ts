import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryChatEventLog } from "../../src/store/chat-event-log.js";
import { createRedisChatEventLog, redisChatEventKeys } from "../../src/store/redis-chat-event-log.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runChatEventLogSuite } from "./chat-event-log.suite.js";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

runChatEventLogSuite("in this process", async () => {
  const logs = new Map<number, ReturnType<typeof createMemoryChatEventLog>>();
  return {
    // One process holds one log; its bound is set when it is made.
    open: async (options = {}) => {
      const key = options.maxPerChat ?? 50;
      if (!logs.has(key)) logs.set(key, createMemoryChatEventLog(options));
      return logs.get(key)!;
    },
    cleanup: async () => undefined,
  };
});

runChatEventLogSuite("Redis", async () => {
  const prefix = `countbot-test-${randomUUID()}`;
  const connections: Redis[] = [];
  return {
    open: async (options = {}) => {
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      connections.push(connection);
      return createRedisChatEventLog({ redis: connection, prefix, channel: "web", ...options });
    },
    cleanup: async () => {
      await Promise.all(connections.map((connection) => connection.quit()));
      await deleteKeys(redis, prefix);
    },
  };
});

describe("Redis chat event log", () => {
  it("keeps a stream and a mark per chat under {prefix}:chat-events, expiring when unused", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    try {
      const log = createRedisChatEventLog({ redis, prefix, channel: "web", ttlMs: 60_000 });
      await log.markDelivered("visitor", (await log.append("visitor", "{}")).id);
      const keys = redisChatEventKeys(prefix, "web", "visitor");
      expect((await redis.keys(`{${prefix}}*`)).sort()).toEqual([keys.delivered, keys.log].sort());
      expect(keys.log).toBe(`{${prefix}}:chat-events:web:visitor:log`);
      for (const key of [keys.log, keys.delivered]) {
        const ttl = await redis.pttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(60_000);
      }
      await expect(log.since("visitor", "not-an-id")).rejects.toThrow(/not an event id/);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });
});
