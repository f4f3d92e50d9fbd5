import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.js";
import { checkRedis } from "../../src/redis/checks.js";
import { redisUrl } from "../support/redis.js";

let redis: Redis;
let original: string | undefined;

beforeAll(async () => {
  redis = new Redis(redisUrl);
  original = ((await redis.config("GET", "maxmemory-policy")) as string[])[1];
});
afterAll(async () => {
  if (original) await redis.config("SET", "maxmemory-policy", original);
  await redis.quit();
});

describe("checkRedis", () => {
  it("accepts this Redis with noeviction and reports its version", async () => {
    await redis.config("SET", "maxmemory-policy", "noeviction");
    const result = await checkRedis(redis, { evictionPolicy: "refuse" });
    expect(result.version).toMatch(/^\d+\.\d+/);
    expect(result.warnings).toEqual([]);
  });

  it("warns loudly, or refuses when configured, about an evicting policy", async () => {
    await redis.config("SET", "maxmemory-policy", "allkeys-lru");
    const warned = await checkRedis(redis, { evictionPolicy: "warn" });
    expect(warned.warnings.join(" ")).toContain("allkeys-lru");
    await expect(checkRedis(redis, { evictionPolicy: "refuse" })).rejects.toBeInstanceOf(ConfigError);
    await redis.config("SET", "maxmemory-policy", original ?? "noeviction");
  });
});
