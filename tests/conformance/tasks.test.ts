import { randomUUID } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFileStore } from "../../src/store/file-store.js";
import { createFileTaskStore } from "../../src/store/file-tasks.js";
import { createRedisStore } from "../../src/store/redis-store.js";
import { createRedisTaskStore, redisTaskKeys } from "../../src/store/redis-tasks.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runTaskStoreSuite } from "./tasks.suite.js";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

runTaskStoreSuite("file store", async () => {
  const root = await mkdtemp(path.join(os.tmpdir(), "countbot-tasks-"));
  const directory = path.join(root, "data", "tasks");
  const tasks = createFileTaskStore({ directory });
  return {
    tasks,
    close: () => tasks.close(),
    cleanup: () => rm(root, { recursive: true, force: true }),
    reopen: async () => {
      const store = createFileStore({ dataDir: path.join(root, "data") });
      return { tasks: store.tasks, close: () => store.close() };
    },
  };
});

runTaskStoreSuite("redis store", async () => {
  const prefix = `countbot-test-${randomUUID()}`;
  const tasks = createRedisTaskStore({ redis, prefix });
  const connections: Redis[] = [];
  return {
    tasks,
    close: () => tasks.close(),
    cleanup: async () => {
      await Promise.all(connections.map((connection) => connection.quit()));
      await deleteKeys(redis, prefix);
    },
    // A new connection, as a restarted process would open.
    reopen: async () => {
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      connections.push(connection);
      const store = createRedisStore({ redis: connection, prefix });
      return { tasks: store.tasks, close: () => store.close() };
    },
  };
});

const sample = {
  label: "label",
  task: "do it",
  sessionKey: "telegram:{-100}",
  status: "pending" as const,
  progress: 0,
  toolCalls: [],
  createdAt: 1_700_000_000_000,
  attempts: 0,
};

describe("file task store", () => {
  it("keeps one JSON file per task under <dataDir>/tasks and leaves no temp file", async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), "countbot-tasks-"));
    const store = createFileStore({ dataDir: root });
    try {
      await store.tasks.create({ ...sample, id: "../../escape" });
      await store.tasks.create({ ...sample, id: "plain" });
      await Promise.all(Array.from({ length: 20 }, (_unused, index) => store.tasks.update("plain", { progress: index })));
      expect(await readdir(root)).toEqual(["tasks"]);
      expect((await readdir(path.join(root, "tasks"))).sort()).toEqual(["%2E%2E%2F%2E%2E%2Fescape.json", "plain.json"]);
      expect((await store.tasks.get("plain"))?.progress).toBe(19);
    } finally {
      await store.close();
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe("redis task store", () => {
  it("keeps every key under the prefix's hash tag, the indexes in step with the tasks", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    const store = createRedisTaskStore({ redis, prefix });
    try {
      await store.create({ ...sample, id: "a" });
      await store.update("a", { status: "running" }, ["pending"]);
      const keys = redisTaskKeys(prefix);
      const found = (await redis.keys(`{${prefix}}*`)).sort();
      expect(found).toEqual([keys.task("a"), keys.all, keys.session("telegram:{-100}"), keys.status("running")].sort());
      expect(await redis.hget(keys.task("a"), "status")).toBe('"running"');
      await store.delete("a");
      expect(await redis.keys(`{${prefix}}*`)).toEqual([]);
    } finally {
      await deleteKeys(redis, prefix);
    }
  });
});
