import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { electLeader } from "../../src/bus/leader.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

let redis: Redis;
const prefix = `countbot-leader-${randomUUID()}`;

beforeAll(() => {
  redis = new Redis(redisUrl);
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe("electLeader", () => {
  it("lets one process lead an account and hands over when it resigns", async () => {
    const first = electLeader({ name: "telegram:bot1", redis, prefix, ttlMs: 1_000 });
    expect(await first.acquired).toBe(true);
    const second = electLeader({ name: "telegram:bot1", redis, prefix, ttlMs: 1_000 });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(first.leading).toBe(true);
    expect(second.leading).toBe(false);
    await first.resign();
    expect(await second.acquired).toBe(true);
    expect(second.leading).toBe(true);
    await second.resign();
  });

  it("takes over from a leader that stopped renewing", async () => {
    await redis.set(`{${prefix}}:leader:telegram:bot2`, "a-dead-process", "PX", 300);
    const successor = electLeader({ name: "telegram:bot2", redis, prefix, ttlMs: 1_000 });
    expect(await successor.acquired).toBe(true);
    await successor.resign();
  });

  it("always leads without Redis", async () => {
    const alone = electLeader({ name: "telegram:bot3" });
    expect(await alone.acquired).toBe(true);
  });
});
