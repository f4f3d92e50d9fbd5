/**
 * The send governor over both quota stores (in this process, and Redis shared by two gateways),
 * on a hand-moved clock, against a platform that counts each call when it arrives (as the fakes
 * and the platforms do): what one gateway takes, the other must never let arrive inside its window.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defineQuotas } from "../../src/gateway/quotas.js";
import { type QuotaStore, createMemoryQuotaStore } from "../../src/gateway/quota-store.js";
import { createRedisQuotaStore } from "../../src/gateway/redis-quota-store.js";
import { createSendGovernor } from "../../src/gateway/send-governor.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const quotas = defineQuotas({ scopes: { chat: { per: "chat", limit: 1, windowMs: 1_000 } } });
const MARGIN_MS = 50;

/** Two gateways' stores over the same budgets, judged by one clock. */
interface Stores {
  open(): QuotaStore;
  cleanup(): Promise<void>;
}

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

const kinds: Array<[string, (now: () => number) => Stores]> = [
  [
    "in this process",
    (now) => {
      const store = createMemoryQuotaStore({ now });
      return { open: () => store, cleanup: async () => undefined };
    },
  ],
  [
    "Redis",
    (now) => {
      const prefix = `countbot-test-${randomUUID()}`;
      return {
        open: () => createRedisQuotaStore({ redis, prefix, channel: "telegram", account: "ab12", now }),
        cleanup: () => deleteKeys(redis, `${prefix}:quota:telegram:ab12`),
      };
    },
  ],
];

/** A store whose answer to a take reaches the governor `stallMs` after the store decided (a loaded event loop). */
function stalled(store: QuotaStore, stall: () => void): QuotaStore {
  return {
    ...store,
    take: async (...args) => {
      const result = await store.take(...args);
      stall();
      return result;
    },
  };
}

describe.each(kinds)("send governor over the quota store %s", (_name, makeStores) => {
  it("counts a call whose take reached it late from the take, not from when the governor heard of it: another gateway's next call cannot arrive inside its window", async () => {
    let clock = 1_000_000;
    const now = () => clock;
    const stores = makeStores(now);
    try {
      // Gateway A's event loop is stalled for 200 ms between the store's take and the call going out.
      const loaded = createSendGovernor({ quotas, store: stalled(stores.open(), () => void (clock += 200)), now, marginMs: () => MARGIN_MS });
      const sleep = async (ms: number) => void (clock += ms);
      const other = createSendGovernor({ quotas, store: stores.open(), now, sleep, marginMs: () => MARGIN_MS });
      const first = { call: "send" as const, chatId: "42", chatType: "private" as const };
      await loaded.acquire(first);
      const arrivedAt = clock; // the platform counts the call now, 200 ms after the store took it
      clock += 10;
      await loaded.answered(first); // 10 ms after the governor heard of the take: well within the margin
      await other.acquire({ call: "send", chatId: "42", chatType: "private" });
      expect(clock - arrivedAt).toBeGreaterThanOrEqual(1_000);
    } finally {
      await stores.cleanup();
    }
  });

  it("leaves a call answered within the margin of its take where the store put it", async () => {
    let clock = 1_000_000;
    const now = () => clock;
    const stores = makeStores(now);
    try {
      const sleep = async (ms: number) => void (clock += ms);
      const first = createSendGovernor({ quotas, store: stores.open(), now, marginMs: () => MARGIN_MS });
      const second = createSendGovernor({ quotas, store: stores.open(), now, sleep, marginMs: () => MARGIN_MS });
      const takenAt = clock;
      const call = { call: "send" as const, chatId: "43", chatType: "private" as const };
      await first.acquire(call);
      clock += 30;
      await first.answered(call);
      await second.acquire({ call: "send", chatId: "43", chatType: "private" });
      // A window and the margin from the take: the answer within the margin moved nothing.
      expect(clock - takenAt).toBe(1_000 + MARGIN_MS);
    } finally {
      await stores.cleanup();
    }
  });
});
