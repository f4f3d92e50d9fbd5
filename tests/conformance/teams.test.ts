import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFileStore } from "../../src/store/file-store.js";
import { createRedisStore } from "../../src/store/redis-store.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { run, runTeamStoreSuite, team } from "./teams.suite.js";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

runTeamStoreSuite("file store", async () => {
  const root = await mkdtemp(path.join(os.tmpdir(), "countbot-teams-"));
  const store = createFileStore({ dataDir: root });
  return {
    teams: store.teams,
    runs: store.runs,
    close: () => store.close(),
    cleanup: () => rm(root, { recursive: true, force: true }),
    reopen: async () => {
      const again = createFileStore({ dataDir: root });
      return { teams: again.teams, runs: again.runs, close: () => again.close() };
    },
  };
});

runTeamStoreSuite("redis store", async () => {
  const prefix = `countbot-test-${randomUUID()}`;
  const store = createRedisStore({ redis, prefix });
  const connections: Redis[] = [];
  return {
    teams: store.teams,
    runs: store.runs,
    close: () => store.close(),
    cleanup: async () => {
      await Promise.all(connections.map((connection) => connection.quit()));
      await deleteKeys(redis, prefix);
    },
    reopen: async () => {
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      connections.push(connection);
      const again = createRedisStore({ redis: connection, prefix });
      return { teams: again.teams, runs: again.runs, close: () => again.close() };
    },
  };
});

describe("redis team and run keys", () => {
  it("keeps every key under the prefix's hash tag and leaves none behind after deletes", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    const store = createRedisStore({ redis, prefix });
    try {
      await store.teams.create(team("t1", "Keys"));
      await store.runs.create(run("r1"));
      expect((await redis.keys(`*${prefix}*`)).every((key) => key.startsWith(`{${prefix}}:`))).toBe(true);
      await store.teams.delete("t1");
      await store.runs.delete("r1");
      expect(await redis.keys(`{${prefix}}*`)).toEqual([]);
    } finally {
      await store.close();
      await deleteKeys(redis, prefix);
    }
  });
});
