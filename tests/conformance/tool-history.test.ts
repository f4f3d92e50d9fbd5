import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisToolHistory, redisToolHistoryKey } from "../../src/tools/redis-tool-history.js";
import { createFileToolHistory } from "../../src/tools/tool-history.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runToolHistorySuite } from "./tool-history.suite.js";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

runToolHistorySuite("JSONL files", async () => {
  const directory = await mkdtemp(path.join(os.tmpdir(), "countbot-tool-history-"));
  return {
    open: async (options) => createFileToolHistory({ directory, ...options }),
    raw: async () => (await Promise.all((await readdir(directory)).map((name) => readFile(path.join(directory, name), "utf8")))).join("\n"),
    cleanup: () => rm(directory, { recursive: true, force: true }),
  };
});

runToolHistorySuite("Redis", async () => {
  const prefix = `countbot-test-${randomUUID()}`;
  const connections: Redis[] = [];
  return {
    // Each history on its own connection, as separate processes would be.
    open: async (options) => {
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      connections.push(connection);
      return createRedisToolHistory({ redis: connection, prefix, ...options });
    },
    raw: async () => {
      const keys = await redis.keys(`{${prefix}}*`);
      return (await Promise.all(keys.map((key) => redis.lrange(key, 0, -1)))).flat().join("\n");
    },
    cleanup: async () => {
      await Promise.all(connections.map((connection) => connection.quit()));
      await deleteKeys(redis, prefix);
    },
  };
});

describe("Redis tool history", () => {
  it("keeps one bounded list per session under {prefix}:tool-history, expiring when unused", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    try {
      const history = createRedisToolHistory({ redis, prefix, maxEntries: 2, ttlMs: 60_000 });
      for (let index = 0; index < 5; index++) {
        await history.add({ sessionKey: "web:a", tool: "exec", arguments: { index }, userMessage: "", result: "", durationMs: 1, success: true });
      }
      const key = redisToolHistoryKey(prefix, "web:a");
      expect(key).toBe(`{${prefix}}:tool-history:web:a`);
      expect(await redis.keys(`{${prefix}}*`)).toEqual([key]);
      expect(await redis.llen(key)).toBe(2);
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60_000);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });
});
