/**
 * History appends batched per turn of the event loop (src/store/redis-history-appends.ts): the
 * turns a worker saves in one moment reach Redis in one script call, each append fenced on its own.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BusError } from "../../../src/errors.js";
import type { InboundMessage } from "../../../src/bus/message.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { createRedisBus } from "../../../src/bus/redis-bus.js";
import { createRedisStore } from "../../../src/store/redis-store.js";
import type { HistoryEntry, Store } from "../../../src/store/store.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";

let redis: Redis;
let prefix: string;
let bus: MessageBus;
let store: Store;
/** Every script call the store made. */
let scriptCalls: string[];

function inbound(chatId: string): InboundMessage {
  return { id: randomUUID(), channel: "test", chatId, senderId: "u", content: "hello", media: [], mentions: [], receivedAt: Date.now(), metadata: {} };
}

function entry(content: string): HistoryEntry {
  return { role: "user", content, at: 1_000 };
}

beforeEach(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  prefix = `countbot-history-batching-${randomUUID()}`;
  scriptCalls = [];
  const counting = new Proxy(redis, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (property === "evalsha") {
        return (sha: string, ...rest: unknown[]) => {
          scriptCalls.push(sha);
          return (target.evalsha as (...args: unknown[]) => Promise<unknown>)(sha, ...rest);
        };
      }
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  bus = createRedisBus({ redis, prefix, leaseTtlMs: 10_000 });
  store = createRedisStore({ redis: counting, prefix });
});

afterEach(async () => {
  await bus.close();
  await store.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe("history appends batched per moment", () => {
  it("writes the appends of one moment in one script call, refusing only the one whose lease is gone", async () => {
    for (const chat of ["a", "b"]) await bus.publishInbound(inbound(chat));
    const claims = await bus.claimSessions({ max: 2, timeoutMs: 1_000 });
    const held = claims.find((claim) => claim.sessionKey === "test:a")!;
    const other = claims.find((claim) => claim.sessionKey === "test:b")!;

    const outcomes = await Promise.allSettled([
      store.sessions.append("test:a", [entry("saved under a held lease")], { token: held.token }),
      store.sessions.append("test:b", [entry("saved under a stale token")], { token: other.token - 100 }),
      store.sessions.append("test:c", [entry("saved without a fence")]),
    ]);

    expect(scriptCalls).toHaveLength(1);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    const refused = outcomes[1]!;
    expect(refused.status === "rejected" && refused.reason instanceof BusError && refused.reason.code).toBe("lease-lost");
    const history = async (key: string) => (await store.sessions.load(key)).history.map((saved) => saved.content);
    expect(await history("test:a")).toEqual(["saved under a held lease"]);
    expect(await history("test:b")).toEqual([]);
    expect(await history("test:c")).toEqual(["saved without a fence"]);
  });
});
