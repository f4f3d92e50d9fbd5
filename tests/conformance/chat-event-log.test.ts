import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVENT_OVERHEAD_BYTES, createMemoryChatEventLog } from "../../src/store/chat-event-log.js";
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

describe("Chat event log in this process", () => {
  /** Bytes the log holds, as it counts them, read through the contract. */
  async function keptBytes(log: ReturnType<typeof createMemoryChatEventLog>, chatIds: string[]): Promise<{ bytes: number; events: number }> {
    let bytes = 0;
    let events = 0;
    for (const chatId of chatIds) {
      for (const event of (await log.since(chatId, "0-0")).events) {
        bytes += Buffer.byteLength(event.payload) + EVENT_OVERHEAD_BYTES;
        events += 1;
      }
    }
    return { bytes, events };
  }

  it("holds at most 4 MiB by default however many chats write: 10,000 chats × 5 replies of 1 KB keep the newest", async () => {
    const log = createMemoryChatEventLog();
    const chatIds = Array.from({ length: 10_000 }, (_, index) => `chat-${index}`);
    const reply = JSON.stringify({ type: "message", content: "x".repeat(1_000) });
    const lastIds = new Map<string, string>();
    for (let round = 0; round < 5; round++) for (const chatId of chatIds) lastIds.set(chatId, (await log.append(chatId, reply)).id);
    const burst = [];
    for (let index = 0; index < 5; index++) burst.push((await log.append("chat-5", reply)).id);
    const kept = await keptBytes(log, chatIds);
    expect(kept.bytes).toBeLessThanOrEqual(4 * 1024 * 1024);
    // The bound is used, not undercut, and what goes first is the oldest.
    expect(kept.bytes).toBeGreaterThan(4 * 1024 * 1024 - 2 * (reply.length + EVENT_OVERHEAD_BYTES));
    expect((await log.since("chat-5", "0-0")).events.map((event) => event.id)).toEqual(burst);
    expect((await log.since("chat-9999", "0-0")).events.map((event) => event.id)).toEqual([lastIds.get("chat-9999")]);
    expect((await log.since("chat-0", "0-0")).events).toEqual([]);
  });

  it("keeps the newest event of the chat just written even when it alone is over the bound", async () => {
    const log = createMemoryChatEventLog({ maxBytes: 1_000 });
    await log.append("other", "small");
    const { id } = await log.append("big", "y".repeat(5_000));
    expect((await log.since("big")).events).toEqual([{ id, payload: "y".repeat(5_000) }]);
    expect((await log.since("other")).events).toEqual([]);
    const { id: next } = await log.append("big", "z".repeat(5_000));
    expect((await log.since("big")).events.map((event) => event.id)).toEqual([next]);
  });

  it("takes its room back as chats are dropped: a chat dropped whole comes back with only what it gets next", async () => {
    const log = createMemoryChatEventLog({ maxBytes: 10 * (10 + EVENT_OVERHEAD_BYTES) });
    for (let index = 0; index < 100; index++) await log.append(`chat-${index}`, "0123456789");
    const chatIds = Array.from({ length: 100 }, (_, index) => `chat-${index}`);
    expect(await keptBytes(log, chatIds)).toEqual({ bytes: 10 * (10 + EVENT_OVERHEAD_BYTES), events: 10 });
    const { id } = await log.append("chat-0", "again");
    expect((await log.since("chat-0")).events).toEqual([{ id, payload: "again" }]);
    expect((await keptBytes(log, chatIds)).events).toBe(10);
  });
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
