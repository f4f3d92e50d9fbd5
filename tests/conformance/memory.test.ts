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

  it("reads of several stores started in one moment go to Redis in one MGET", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    const sent: string[] = [];
    const counting = new Proxy(redis, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (typeof value !== "function" || typeof property !== "string") return value;
        return (...args: unknown[]) => {
          sent.push(property);
          return (value as (...rest: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    try {
      const chat = createRedisMemoryStore({ redis: counting, prefix, scope: "chat" });
      const person = createRedisMemoryStore({ redis: counting, prefix, scope: "person" });
      await chat.write("web:a", "the chat's");
      await person.write("web:ada", "ada's");
      sent.length = 0;
      expect(await Promise.all([chat.read("web:a"), person.read("web:ada"), person.read("web:bob"), chat.read("web:none")])).toEqual(["the chat's", "ada's", "", ""]);
      expect(sent).toEqual(["mget"]);
      // Alone, a read is one call too.
      sent.length = 0;
      expect(await chat.read("web:a")).toBe("the chat's");
      expect(sent).toEqual(["mget"]);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });
});
