import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVENT_OVERHEAD_BYTES, createMemoryChatEventLog } from "../../src/store/chat-event-log.js";
import { createRedisChatEventLog, redisChatEventKeys } from "../../src/store/redis-chat-event-log.js";
import { commandsOn, countingScripts, deleteKeys, redisUrl } from "../support/redis.js";
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
        // ttlMs and a tenth: renewed once in a while, not per event (see below).
        expect(ttl).toBeLessThanOrEqual(66_000);
      }
      await expect(log.since("visitor", "not-an-id")).rejects.toThrow(/not an event id/);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });

  it("keeps the events of one moment, of many chats, in one script call, each with the newest id of its chat before it", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    const { client: counting, scripts } = countingScripts(redis);
    try {
      const log = createRedisChatEventLog({ redis: counting, prefix, channel: "web" });
      const chats = Array.from({ length: 20 }, (_, index) => `chat-${index}`);
      const appended = await Promise.all([...chats.map((chatId) => log.append(chatId, `first ${chatId}`)), log.append("chat-0", "second")]);
      expect(scripts()).toBe(1);
      for (const event of appended.slice(0, 20)) expect(event.previous).toBeUndefined();
      expect(appended[20]!.previous).toBe(appended[0]!.id);
      expect((await log.since("chat-0", "0-0")).events).toEqual([
        { id: appended[0]!.id, payload: "first chat-0" },
        { id: appended[20]!.id, payload: "second" },
      ]);
      expect((await log.since("chat-7", "0-0")).events).toEqual([{ id: appended[7]!.id, payload: "first chat-7" }]);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });

  it("renews a chat's expiry once a tenth of ttlMs, not on every event, and always for a new log", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    let now = 1_000_000;
    try {
      const log = createRedisChatEventLog({ redis, prefix, channel: "web", ttlMs: 60_000, now: () => now });
      const keys = redisChatEventKeys(prefix, "web", "busy");
      const first = await log.append("busy", "a");
      await log.markDelivered("busy", first.id);
      expect(await redis.pttl(keys.log)).toBeGreaterThan(60_000);
      // As if the log had aged: an event within the tenth does not renew it.
      await redis.pexpire(keys.log, 50_000);
      await redis.pexpire(keys.delivered, 50_000);
      now += 5_999;
      await log.append("busy", "b");
      expect(await redis.pttl(keys.log)).toBeLessThanOrEqual(50_000);
      expect(await redis.pttl(keys.delivered)).toBeLessThanOrEqual(50_000);
      // Past the tenth the next event renews the log and its mark.
      now += 2;
      await log.append("busy", "c");
      expect(await redis.pttl(keys.log)).toBeGreaterThan(60_000);
      expect(await redis.pttl(keys.delivered)).toBeGreaterThan(60_000);
      // A log deleted meanwhile gets its expiry with its first event, renewed or not.
      await redis.del(keys.log);
      await log.append("busy", "d");
      expect(await redis.pttl(keys.log)).toBeGreaterThan(60_000);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });

  it("costs Redis, per final of a busy chat: one script call shared by the moment, XREVRANGE, XADD, and one SET for its mark", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    try {
      const log = createRedisChatEventLog({ redis, prefix, channel: "web" });
      const first = await log.append("busy", "a");
      await log.markDelivered("busy", first.id);
      const counts = await commandsOn(redis, prefix, async () => {
        const { id } = await log.append("busy", "b");
        await log.markDelivered("busy", id);
      });
      expect(counts).toEqual({ evalsha: 2, xrevrange: 1, xadd: 1, set: 1 });
      // A mark never moves back: an older id leaves it where it is.
      await log.markDelivered("busy", first.id);
      expect((await log.since("busy")).events).toEqual([]);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });
});
