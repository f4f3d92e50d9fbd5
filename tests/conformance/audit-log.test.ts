import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFileAuditLog } from "../../src/tools/audit-log.js";
import { createRedisAuditLog, redisAuditKey } from "../../src/tools/redis-audit-log.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runAuditLogSuite } from "./audit-log.suite.js";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

runAuditLogSuite("rotated file", async () => {
  const directory = await mkdtemp(path.join(os.tmpdir(), "countbot-audit-"));
  return {
    open: async (options) => createFileAuditLog({ directory, maxFileBytes: 1_000_000, maxFiles: 3, ...options }),
    raw: async () => (await Promise.all((await readdir(directory)).map((name) => readFile(path.join(directory, name), "utf8")))).join("\n"),
    manyWriters: false,
    cleanup: () => rm(directory, { recursive: true, force: true }),
  };
}, { manyWriters: false });

runAuditLogSuite("Redis stream", async () => {
  const prefix = `countbot-test-${randomUUID()}`;
  const connections: Redis[] = [];
  return {
    open: async (options) => {
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      connections.push(connection);
      return createRedisAuditLog({ redis: connection, prefix, ...options });
    },
    raw: async () => JSON.stringify(await redis.xrange(redisAuditKey(prefix), "-", "+")),
    manyWriters: true,
    cleanup: async () => {
      await Promise.all(connections.map((connection) => connection.quit()));
      await deleteKeys(redis, prefix);
    },
  };
}, { manyWriters: true });

describe("Redis audit stream", () => {
  it("is one stream under {prefix}:audit, trimmed as it grows", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    try {
      const log = createRedisAuditLog({ redis, prefix, secrets: [], maxEntries: 100 });
      for (let index = 0; index < 1_000; index++) {
        void log.record({ sessionKey: "web:a", channel: "web", chatId: "a", tool: "exec", arguments: { index }, success: true, result: "", durationMs: 1, attempts: 1 });
      }
      await log.close();
      expect(await redis.keys(`{${prefix}}*`)).toEqual([redisAuditKey(prefix)]);
      // Approximate trimming drops whole nodes: well under what was written, at least what was asked.
      const length = await redis.xlen(redisAuditKey(prefix));
      expect(length).toBeGreaterThanOrEqual(100);
      expect(length).toBeLessThan(500);
      const newest = JSON.parse((await log.tail(1))[0]!) as { arguments: { index: number } };
      expect(newest.arguments.index).toBe(999);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });
});
