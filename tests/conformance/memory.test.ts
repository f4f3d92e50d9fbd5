import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFileMemoryStore } from "../../src/memory/memory.js";
import { createRedisMemoryStore } from "../../src/memory/redis-memory.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runMemoryStoreSuite } from "./memory.suite.js";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

runMemoryStoreSuite("MEMORY.md files", async () => {
  const workspace = await mkdtemp(path.join(os.tmpdir(), "countbot-memory-"));
  return {
    open: async (options) => createFileMemoryStore({ workspace, ...options }),
    locationPrefix: "",
    cleanup: () => rm(workspace, { recursive: true, force: true }),
  };
});

runMemoryStoreSuite("Redis", async () => {
  const prefix = `countbot-test-${randomUUID()}`;
  const connections: Redis[] = [];
  return {
    // Each store on its own connection, as separate workers would be.
    open: async (options) => {
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      connections.push(connection);
      return createRedisMemoryStore({ redis: connection, prefix, ...options });
    },
    locationPrefix: "redis:",
    cleanup: async () => {
      await Promise.all(connections.map((connection) => connection.quit()));
      await deleteKeys(redis, prefix);
    },
  };
});

describe("Redis memory store", () => {
  it("keeps its keys under {prefix}:memory, a chat's apart from the global one", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    try {
      await createRedisMemoryStore({ redis, prefix, scope: "chat" }).write("web:a:current", "chat");
      await createRedisMemoryStore({ redis, prefix, scope: "global" }).write("web:a", "global");
      expect((await redis.keys(`{${prefix}}*`)).sort()).toEqual([`{${prefix}}:memory:chat:web:a:current:current`, `{${prefix}}:memory:global:current`]);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });
});
