/** Test helpers for the real Redis at REDIS_URL: each test uses its own prefix and removes its keys. */
import type { Redis } from "ioredis";

export const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

/** Deletes every key under the hash tag `{prefix}`. */
export async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `{${prefix}}*`, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== "0");
}
