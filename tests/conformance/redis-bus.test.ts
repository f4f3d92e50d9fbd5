import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createMemoryBus } from "../../src/bus/memory-bus.js";
import type { InboundMessage, OutboundMessage } from "../../src/bus/message.js";
import type { MessageBus } from "../../src/bus/message-bus.js";
import { createRedisBus } from "../../src/bus/redis-bus.js";
import { createRedisBusOf } from "../../src/bus/partitioned-bus.js";
import { createRedisStore, redisHistoryKeys } from "../../src/store/redis-store.js";
import { type HistoryEntry, type Store, storedEntryTexts } from "../../src/store/store.js";
import { runBusSuite } from "./bus.suite.js";
import { deleteKeys } from "../support/redis.js";

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
let redis: Redis;

beforeAll(() => {
  redis = new Redis(url, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

runBusSuite("redis", async (options) => {
  const prefix = `countbot-test-${randomUUID()}`;
  const bus = createRedisBus({ ...options, redis, prefix, redeliveryDelayMs: 20 });
  return {
    bus,
    cleanup: async () => {
      await bus.close();
      await deleteKeys(redis, prefix);
    },
  };
});

// The same guarantees with the bus split over partitions, each under a hash tag of its own.
runBusSuite("redis, 4 partitions", async (options) => {
  const prefix = `countbot-test-${randomUUID()}`;
  const bus = createRedisBusOf({ ...options, redis, prefix, redeliveryDelayMs: 20, partitions: 4 });
  return {
    bus,
    cleanup: async () => {
      await bus.close();
      await deleteKeys(redis, prefix);
    },
  };
});

// Beside the Redis store, a turn's history goes with its ack: the same lease check, one step.
for (const partitions of [1, 4]) {
  describe(`redis bus with the store's history keys${partitions > 1 ? `, ${partitions} partitions` : ""}`, () => {
    let prefix: string;
    let clock: number;
    let bus: MessageBus;
    let store: Store;

    beforeEach(() => {
      prefix = `countbot-test-${randomUUID()}`;
      clock = 1_700_000_000_000;
      const now = () => clock;
      bus = createRedisBusOf({ redis, prefix, partitions, now, leaseTtlMs: 1_000, historyKeys: redisHistoryKeys });
      store = createRedisStore({ redis, prefix, partitions, now });
    });
    afterEach(async () => {
      await bus.close();
      await store.close();
      await deleteKeys(redis, prefix);
    });

    const inbound = (chatId: string, content: string): InboundMessage => ({ id: randomUUID(), channel: "web", chatId, senderId: "u", content, media: [], mentions: [], receivedAt: clock, metadata: {} });
    const reply = (chatId: string, content: string): OutboundMessage => ({ id: randomUUID(), channel: "web", chatId, content, kind: "final", media: [], metadata: {} });
    const turn = (question: string, answer: string): HistoryEntry[] => [
      { role: "user", content: question, at: clock },
      { role: "assistant", content: answer, at: clock },
    ];

    it("appends a turn's history with its ack, and a stale ack writes neither the history nor the reply", async () => {
      expect(bus.historyOnAck).toBe(true);
      const seen: string[] = [];
      const subscription = await bus.consumeOutbound("web", async (event) => {
        if (event.type === "message") seen.push(event.message.content);
      });
      for (const chatId of ["a", "b", "c"]) await bus.publishInbound(inbound(chatId, `hello from ${chatId}`));
      const claims = await bus.claimSessions({ max: 3, timeoutMs: 1_000 });
      expect(claims).toHaveLength(3);
      // Acked in one moment: one batch per partition.
      await Promise.all(claims.map((claim) => bus.ack(claim, 1, reply(claim.messages[0]!.chatId, `answer ${claim.messages[0]!.chatId}`), storedEntryTexts(turn(claim.messages[0]!.content, `answer ${claim.messages[0]!.chatId}`)))));
      for (const chatId of ["a", "b", "c"]) {
        expect((await store.sessions.load(`web:${chatId}`)).history.map((entry) => entry.content)).toEqual([`hello from ${chatId}`, `answer ${chatId}`]);
      }
      expect((await store.sessions.list()).map((meta) => meta.key)).toEqual(["web:a", "web:b", "web:c"]);

      await bus.publishInbound(inbound("a", "again"));
      const zombie = (await bus.claimSession({ timeoutMs: 1_000 }))!;
      clock += 1_500;
      const successor = (await bus.claimSession({ timeoutMs: 1_000 }))!;
      await expect(bus.ack(zombie, 1, reply("a", "stale"), storedEntryTexts(turn("again", "stale")))).rejects.toMatchObject({ code: "lease-lost" });
      await bus.ack(successor, 1, reply("a", "fresh"), storedEntryTexts(turn("again", "fresh")));
      expect((await store.sessions.load("web:a")).history.map((entry) => entry.content)).toEqual(["hello from a", "answer a", "again", "fresh"]);
      await waitUntil(() => seen.length === 4);
      await subscription.close();
      expect([...seen].sort()).toEqual(["answer a", "answer b", "answer c", "fresh"]);
    });
  });
}

it("the in-process bus takes no history with an ack: the caller appends to the store", async () => {
  const bus = createMemoryBus();
  expect(bus.historyOnAck).not.toBe(true);
  await bus.publishInbound({ id: "m-1", channel: "web", chatId: "x", senderId: "u", content: "hi", media: [], mentions: [], receivedAt: 0, metadata: {} });
  const claim = (await bus.claimSession({ timeoutMs: 1_000 }))!;
  await expect(bus.ack(claim, 1, undefined, ['{"role":"user"}'])).rejects.toMatchObject({ code: "invalid" });
  await bus.close();
});

async function waitUntil(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

it("keeps a reply chunk's delivery mark as long as a platform event's dedupe, not a week: marks of a busy bot do not pile up", async () => {
  const prefix = `countbot-test-${randomUUID()}`;
  const bus = createRedisBus({ redis, prefix, dedupeTtlMs: 60_000 });
  try {
    expect(await bus.markDelivered("reply-1#0")).toBe(true);
    expect(await bus.markDelivered("reply-1#0")).toBe(false);
    const ttl = await redis.pttl(`{${prefix}}:sent:reply-1#0`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  } finally {
    await bus.close();
    await deleteKeys(redis, prefix);
  }
});

it("counts a batch's failed claims by its first message's id, an id with a quote or a backslash too", async () => {
  const prefix = `countbot-test-${randomUUID()}`;
  const bus = createRedisBus({ redis, prefix });
  try {
    for (const id of ['odd"id\\one', "plain-id"]) {
      const chatId = `chat-${id.length}`;
      await bus.publishInbound({ id, channel: "web", chatId, senderId: "u", content: "hi", media: [], mentions: [], receivedAt: 0, metadata: {} });
      const first = (await bus.claimSession({ timeoutMs: 1_000 }))!;
      expect(first.messages[0]!.id).toBe(id);
      expect(first.attempt).toBe(1);
      await bus.release(first);
      const second = (await bus.claimSession({ timeoutMs: 1_000 }))!;
      expect(second.attempt, id).toBe(2);
      await bus.ack(second);
    }
  } finally {
    await bus.close();
    await deleteKeys(redis, prefix);
  }
});
