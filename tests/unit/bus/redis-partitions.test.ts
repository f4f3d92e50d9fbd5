/**
 * `redis.partitions` as a deployment sees it: the bus and the sessions' history split over
 * `{prefix:p<k>}` tags, a chat's keys in one partition, and every process held to the count Redis
 * recorded first.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createInfrastructure } from "../../../src/app/infrastructure.js";
import { loadConfig } from "../../../src/config/load.js";
import { ConfigError } from "../../../src/errors.js";
import { partitionOf } from "../../../src/redis/keys.js";
import { topologyOf } from "../../../src/redis/client.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";

let redis: Redis;
let root: string;
const prefixes: string[] = [];

beforeAll(async () => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  root = await mkdtemp(path.join(tmpdir(), "countbot-partitions-"));
});
afterEach(async () => {
  await Promise.all(prefixes.splice(0).map((prefix) => deleteKeys(redis, prefix)));
});
afterAll(async () => {
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

async function infrastructureWith(prefix: string, partitions: number) {
  const file = path.join(root, `${randomUUID()}.json`);
  await writeFile(file, JSON.stringify({ redis: { prefix, partitions } }));
  const config = loadConfig({ env: { COUNTBOT_DATA_DIR: root, REDIS_URL: redisUrl }, cwd: root, file });
  return createInfrastructure(config, pino({ level: "silent" }));
}

function message(chatId: string) {
  return { id: randomUUID(), channel: "web", chatId, senderId: "u1", content: `hello ${chatId}`, media: [], mentions: [], receivedAt: Date.now(), metadata: {} };
}

describe("redis.partitions", () => {
  it("keeps each chat's mailbox, lease and history under its partition's tag, and answers every chat", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    prefixes.push(prefix);
    const infrastructure = await infrastructureWith(prefix, 4);
    try {
      const chats = Array.from({ length: 12 }, (_unused, index) => `chat-${index}`);
      for (const chat of chats) expect((await infrastructure.bus.publishInbound(message(chat))).accepted).toBe(true);
      const used = new Set(chats.map((chat) => partitionOf(`web:${chat}`, 4)));
      expect(used.size).toBeGreaterThan(1);
      for (const chat of chats) expect(await redis.exists(`{${prefix}:p${partitionOf(`web:${chat}`, 4)}}:in:web:${chat}`)).toBe(1);
      expect(await redis.exists(`{${prefix}}:ready`)).toBe(0);
      const claimed: string[] = [];
      while (claimed.length < chats.length) {
        const claims = await infrastructure.bus.claimSessions({ max: 5, timeoutMs: 2_000 });
        expect(claims.length).toBeGreaterThan(0);
        for (const claim of claims) {
          await infrastructure.store.sessions.append(claim.sessionKey, [{ role: "user", content: claim.messages[0]!.content, at: 1 }], { token: claim.token });
          await infrastructure.bus.ack(claim);
          claimed.push(claim.sessionKey);
        }
      }
      expect(claimed.sort()).toEqual(chats.map((chat) => `web:${chat}`).sort());
      const listed = await infrastructure.store.sessions.list();
      expect(listed.map((meta) => meta.key)).toEqual(chats.map((chat) => `web:${chat}`).sort());
      expect((await infrastructure.store.sessions.load("web:chat-3")).history.map((entry) => entry.content)).toEqual(["hello chat-3"]);
    } finally {
      await infrastructure.close();
    }
  });

  it("refuses to start with another count than the deployment's, naming redis.partitions", async () => {
    const prefix = `countbot-test-${randomUUID()}`;
    prefixes.push(prefix);
    await (await infrastructureWith(prefix, 4)).close();
    const refused = await infrastructureWith(prefix, 2).then(
      async (infrastructure) => {
        await infrastructure.close();
        return undefined;
      },
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).message).toMatch(/redis\.partitions is 2, but the deployment .* uses 4/);
    // A deployment from before the record, with sessions under `{prefix}`, counts as one partition.
    const older = `countbot-test-${randomUUID()}`;
    prefixes.push(older);
    await redis.zadd(`{${older}}:sessions`, 1, "web:old");
    await expect(infrastructureWith(older, 4)).rejects.toThrow(/redis\.partitions is 4, but the deployment .* uses 1/);
    await (await infrastructureWith(older, 1)).close();
  });
});

describe("redis.cluster", () => {
  it("refuses acceptAfterReplicas, whose WAIT would confirm another shard's writes", () => {
    const nodes = [{ host: "127.0.0.1", port: 7000 }];
    expect(() => topologyOf({ cluster: nodes, sentinelMaster: "mymaster", acceptAfterReplicas: 1 })).toThrow(/redis\.acceptAfterReplicas is not supported with redis\.cluster/);
    expect(topologyOf({ cluster: nodes, sentinelMaster: "mymaster", acceptAfterReplicas: 0 })).toEqual({ cluster: nodes });
  });
});
