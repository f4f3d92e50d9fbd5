import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { createRedisBus } from "../../src/bus/redis-bus.js";
import { createRedisBusOf } from "../../src/bus/partitioned-bus.js";
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
