import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createFilePairingStore } from "../../src/store/file-pairing.js";
import { createFileStore } from "../../src/store/file-store.js";
import { createRedisPairingStore, redisPairingKeys } from "../../src/store/redis-pairing.js";
import { createRedisStore } from "../../src/store/redis-store.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runPairingStoreSuite } from "./pairing.suite.js";

const START = 1_700_000_000_000;
const TTL = 60 * 60 * 1000;
const alice = { channel: "telegram", senderId: "111", senderName: "Alice", chatId: "111" };

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

runPairingStoreSuite("file store", async ({ newCode }) => {
  const root = await mkdtemp(path.join(os.tmpdir(), "countbot-pairing-"));
  const dataDir = path.join(root, "data");
  const pairing = createFilePairingStore({ file: path.join(dataDir, "pairing.json"), newCode });
  return {
    pairing,
    reopen: async () => createFileStore({ dataDir }),
    close: () => pairing.close(),
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
});

runPairingStoreSuite("redis store", async ({ newCode }) => {
  const prefix = `countbot-test-${randomUUID()}`;
  const pairing = createRedisPairingStore({ redis, prefix, newCode });
  const connections: Redis[] = [];
  return {
    pairing,
    // A new connection, as a restarted process would open.
    reopen: async () => {
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      connections.push(connection);
      return createRedisStore({ redis: connection, prefix });
    },
    close: () => pairing.close(),
    cleanup: async () => {
      await Promise.all(connections.map((connection) => connection.quit()));
      await deleteKeys(redis, prefix);
    },
  };
});

describe("file pairing store", () => {
  let root: string;
  let file: string;

  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), "countbot-pairing-"));
    file = path.join(root, "pairing.json");
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("sees what another process wrote to the same file (the CLI approving for the running bot)", async () => {
    const bot = createFilePairingStore({ file });
    const cli = createFilePairingStore({ file });
    const { request } = await bot.request(alice, { ttlMs: TTL, now: START });
    expect(await bot.isApproved("telegram", "111")).toBe(false);
    expect((await cli.approve(request.code, START + 1))?.senderId).toBe("111");
    expect(await bot.isApproved("telegram", "111")).toBe(true);
    await cli.revoke("telegram", "111");
    expect(await bot.isApproved("telegram", "111")).toBe(false);
    await Promise.all([bot.close(), cli.close()]);
  });

  it("loses no update when two stores write at once, and leaves no lock or temp file", async () => {
    const stores = [createFilePairingStore({ file }), createFilePairingStore({ file })];
    await Promise.all(
      Array.from({ length: 20 }, (_unused, index) =>
        stores[index % 2]!.request({ channel: "telegram", senderId: String(index), chatId: String(index) }, { ttlMs: TTL, now: START }),
      ),
    );
    expect(await stores[0]!.listPending(START)).toHaveLength(20);
    expect(await readdir(root)).toEqual(["pairing.json"]);
    await Promise.all(stores.map((store) => store.close()));
  });

  it("takes over a lock left by a crashed process", async () => {
    await writeFile(`${file}.lock`, "12345\n");
    const waiting = createFilePairingStore({ file, staleLockMs: 50, lockTimeoutMs: 2_000 });
    expect((await waiting.request(alice, { ttlMs: TTL, now: START })).created).toBe(true);
    await waiting.close();
  });

  it("refuses to overwrite a file it cannot read, rather than forgetting every approval", async () => {
    await writeFile(file, "{ not json");
    const store = createFilePairingStore({ file });
    await expect(store.request(alice, { ttlMs: TTL, now: START })).rejects.toThrow(/not valid JSON/);
    await expect(store.isApproved("telegram", "111")).rejects.toThrow(/not valid JSON/);
    expect(await readFile(file, "utf8")).toBe("{ not json");
    await store.close();
  });

  it("drops expired requests when it writes anyway", async () => {
    const store = createFilePairingStore({ file });
    await store.request(alice, { ttlMs: TTL, now: START });
    await store.request({ ...alice, senderId: "222", chatId: "222" }, { ttlMs: TTL, now: START + TTL });
    const saved = JSON.parse(await readFile(file, "utf8")) as { pending: Array<{ senderId: string }> };
    expect(saved.pending.map((request) => request.senderId)).toEqual(["222"]);
    await store.close();
  });
});

describe("redis pairing store", () => {
  let prefix: string;
  beforeEach(() => {
    prefix = `countbot-test-${randomUUID()}`;
  });
  afterEach(async () => {
    await deleteKeys(redis, prefix);
  });

  it("keeps its keys under {prefix}:pairing and sweeps expired codes", async () => {
    const store = createRedisPairingStore({ redis, prefix });
    await store.request(alice, { ttlMs: TTL, now: START });
    const keys = redisPairingKeys(prefix);
    expect((await redis.keys(`{${prefix}}*`)).sort()).toEqual([keys.codes, keys.expiry, keys.senders].sort());
    for (const key of Object.values(keys)) expect(key.startsWith(`{${prefix}}:pairing:`)).toBe(true);

    await store.request({ ...alice, senderId: "222", chatId: "222" }, { ttlMs: TTL, now: START + TTL });
    expect(await redis.hkeys(keys.senders)).toEqual(["telegram:222"]);
    expect(await redis.zcard(keys.expiry)).toBe(1);
  });
});
