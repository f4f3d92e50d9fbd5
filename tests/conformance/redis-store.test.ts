import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { busKeys } from "../../src/bus/redis-keys.js";
import { partitionOf } from "../../src/redis/keys.js";
import { BusError, ConfigError } from "../../src/errors.js";
import { createRedisStore, readRedisArchivedHistory, redisStoreKeys } from "../../src/store/redis-store.js";
import type { HistoryEntry, Store } from "../../src/store/store.js";
import { commandsOn, countingScripts, deleteKeys, redisUrl } from "../support/redis.js";
import { runSessionStoreSuite } from "./store.suite.js";

let redis: Redis;

beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

const testPrefix = () => `countbot-test-${randomUUID()}`;

for (const partitions of [1, 4]) {
  runSessionStoreSuite(partitions === 1 ? "redis store" : `redis store, ${partitions} partitions`, async ({ now }) => {
    const prefix = testPrefix();
    const connections: Redis[] = [];
    // The bus's lease keys of a session: its partition's, beside its history.
    const leaseKeys = (key: string) => busKeys(partitions === 1 ? prefix : `${prefix}:p${partitionOf(key, partitions)}`);
    return {
      store: createRedisStore({ redis, prefix, now, partitions }),
      cleanup: async () => {
        await Promise.all(connections.map((connection) => connection.quit()));
        await deleteKeys(redis, prefix);
      },
      archived: (key) => readRedisArchivedHistory({ redis, prefix, partitions }, key),
      // A new connection, as a restarted process would open.
      reopen: async () => {
        const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
        connections.push(connection);
        return createRedisStore({ redis: connection, prefix, now, partitions });
      },
      grantLease: async (key, token) => {
        const keys = leaseKeys(key);
        await redis.hset(keys.own, key, `${token}:test-worker`);
        await redis.zadd(keys.workers, Number.MAX_SAFE_INTEGER, "test-worker");
      },
    };
  });
}

const START = 1_700_000_000_000;
const LEASE_MS = 30_000;

function entry(content: string, role: HistoryEntry["role"] = "user"): HistoryEntry {
  return { role, content, at: START };
}

/** Every key under `{prefix}`, sorted. */
async function keysUnder(prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `{${prefix}}*`, "COUNT", 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== "0");
  return found.sort();
}

/** Redis Cluster's hash tag: the text between the first `{` and the first `}` after it, if any. */
function hashTagOf(key: string): string | undefined {
  const open = key.indexOf("{");
  if (open === -1) return undefined;
  const close = key.indexOf("}", open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

describe("redis store", () => {
  let prefix: string;
  let clock: number;
  let store: Store;

  beforeEach(() => {
    prefix = testPrefix();
    clock = START;
    store = createRedisStore({ redis, prefix, now: () => clock });
  });

  afterEach(async () => {
    await store.close();
    await deleteKeys(redis, prefix);
  });

  /** What the bus does on a claim: the token becomes the session's current one, held by a worker alive until `expiresAt`. */
  async function grantLease(key: string, token: number, expiresAt = clock + LEASE_MS): Promise<void> {
    const keys = busKeys(prefix);
    await redis.hset(keys.own, key, `${token}:worker-of-${key}`);
    await redis.zadd(keys.workers, expiresAt, `worker-of-${key}`);
  }

  /** Everything the store shows for a key, to prove a refused write changed nothing. */
  async function observe(key: string) {
    return {
      snapshot: await store.sessions.load(key),
      list: await store.sessions.list(),
      archived: await readRedisArchivedHistory({ redis, prefix }, key),
      keys: await keysUnder(prefix),
    };
  }

  async function expectLeaseLost(write: Promise<void>): Promise<void> {
    const error = await write.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(BusError);
    expect((error as BusError).code).toBe("lease-lost");
  }

  it("writes with a fence while its token holds a live lease", async () => {
    await grantLease("telegram:1", 7);
    await store.sessions.append("telegram:1", [entry("one"), entry("two", "assistant")], { token: 7 });
    clock += LEASE_MS - 1; // the last millisecond of the lease
    await store.sessions.compact("telegram:1", [entry("two", "assistant")], { token: 7 });
    expect((await store.sessions.load("telegram:1")).history).toEqual([entry("two", "assistant")]);
    expect(await readRedisArchivedHistory({ redis, prefix }, "telegram:1")).toEqual([entry("one")]);
  });

  it("refuses a fenced append from a stale token and writes nothing", async () => {
    await store.sessions.append("telegram:1", [entry("before")]);
    await grantLease("telegram:1", 8); // taken over: the zombie still holds token 7
    const before = await observe("telegram:1");
    clock += 1000;
    await expectLeaseLost(store.sessions.append("telegram:1", [entry("zombie")], { token: 7 }));
    await expectLeaseLost(store.sessions.append("telegram:1", [], { token: 7 }));
    expect(await observe("telegram:1")).toEqual(before);
  });

  it("refuses a fenced append once the lease expired, from its expiry on", async () => {
    await grantLease("telegram:2", 7, clock);
    await expectLeaseLost(store.sessions.append("telegram:2", [entry("at expiry")], { token: 7 }));
    await grantLease("telegram:2", 7, clock - 1);
    await expectLeaseLost(store.sessions.append("telegram:2", [entry("after expiry")], { token: 7 }));
    // A new session refused is not created either.
    expect(await keysUnder(prefix)).toEqual([busKeys(prefix).workers, busKeys(prefix).own].sort());
    expect(await store.sessions.list()).toEqual([]);
  });

  it("refuses a fenced write to a session that has no lease", async () => {
    await expectLeaseLost(store.sessions.append("telegram:3", [entry("unleased")], { token: 1 }));
    await expectLeaseLost(store.sessions.compact("telegram:3", [], { token: 1 }));
    expect(await keysUnder(prefix)).toEqual([]);
  });

  it("refuses a fenced compact from a stale token, keeping history and archive", async () => {
    await store.sessions.append("web:x", [entry("one"), entry("two"), entry("three")]);
    await store.sessions.compact("web:x", [entry("two"), entry("three")]);
    await grantLease("web:x", 3, clock - 1);
    const before = await observe("web:x");
    await expectLeaseLost(store.sessions.compact("web:x", [entry("three")], { token: 3 }));
    expect(await observe("web:x")).toEqual(before);
  });

  it("fences /new like a write: a stale token cannot reset the session", async () => {
    await store.sessions.append("web:y", [entry("keep me")]);
    await grantLease("web:y", 9);
    const before = await observe("web:y");
    await expectLeaseLost(store.sessions.reset("web:y", { token: 8 }));
    expect(await observe("web:y")).toEqual(before);
    await store.sessions.reset("web:y", { token: 9 });
    expect((await store.sessions.load("web:y")).history).toEqual([]);
  });

  it("keeps every key in the prefix's hash slot, whatever braces the session key holds", async () => {
    const sessionKeys = ["a{b}c", "{x}", "}{", "{}", "{", "}", "telegram:{-100}", "plain"];
    for (const key of sessionKeys) {
      await store.sessions.append(key, [entry("one"), entry("two")]);
      await store.sessions.compact(key, [entry("two")]);
      await store.sessions.reset(key);
      await store.sessions.append(key, [entry("three")]);
    }
    await grantLease("a{b}c", 1);

    // Each write leaves a short-lived marker of its own (`write:<id>`, so a replayed write is done once).
    const all = await keysUnder(prefix);
    const keys = all.filter((key) => !key.includes("}:write:"));
    expect(all.length - keys.length).toBe(sessionKeys.length * 4);
    for (const key of all) expect(hashTagOf(key), key).toBe(prefix);
    const layout = redisStoreKeys(prefix);
    const expected = [
      layout.sessions,
      busKeys(prefix).own,
      busKeys(prefix).workers,
      ...sessionKeys.flatMap((key) => {
        const session = layout.session(key);
        return [session.meta, session.history, session.archive(0)];
      }),
    ];
    expect(keys).toEqual(expected.sort());
    for (const key of keys) expect(hashTagOf(key), key).toBe(prefix);
    for (const key of sessionKeys) {
      expect((await store.sessions.load(key)).history).toEqual([entry("three")]);
      expect(await readRedisArchivedHistory({ redis, prefix }, key)).toEqual([entry("one"), entry("two")]);
    }
  });

  it("loads the sessions of one moment in one script call, each with its own meta and history", async () => {
    await store.sessions.append("web:a", [{ role: "user", content: "a1", at: 1 }]);
    await store.sessions.append("web:b", [{ role: "user", content: "b1", at: 2 }, { role: "assistant", content: "b2", at: 3 }]);
    const { client: counting, scripts } = countingScripts(redis);
    const reader = createRedisStore({ redis: counting, prefix, now: () => clock });
    try {
      const [a, b, unknown] = await Promise.all(["web:a", "web:b", "web:none"].map((key) => reader.sessions.load(key)));
      expect(scripts()).toBe(1);
      expect(a!.history.map((entry) => entry.content)).toEqual(["a1"]);
      expect(b!.history.map((entry) => entry.content)).toEqual(["b1", "b2"]);
      expect(b!.meta.key).toBe("web:b");
      expect(unknown).toEqual({ meta: { key: "web:none", createdAt: clock, updatedAt: clock, generation: 0 }, history: [] });
    } finally {
      await reader.close();
    }
  });

  it("reads only the entries it does not hold, and a history whole again once another process compacted or reset it", async () => {
    // The clock stands still: every write lands in the same millisecond, so only the rewrite count tells a compact apart.
    const other = createRedisStore({ redis, prefix, now: () => clock });
    const history = redisStoreKeys(prefix).session("web:held").history;
    try {
      await store.sessions.append("web:held", [entry("one"), entry("two", "assistant")]);
      expect((await store.sessions.load("web:held")).history).toEqual([entry("one"), entry("two", "assistant")]);
      // Changed behind the store's back: a load that read the whole history again would show it.
      await redis.lset(history, 0, JSON.stringify(entry("changed in place")));
      await other.sessions.append("web:held", [entry("three")]);
      expect((await store.sessions.load("web:held")).history).toEqual([entry("one"), entry("two", "assistant"), entry("three")]);
      // Nothing new: what is held, once more.
      expect((await store.sessions.load("web:held")).history).toEqual([entry("one"), entry("two", "assistant"), entry("three")]);

      await other.sessions.compact("web:held", [entry("three")]);
      await other.sessions.append("web:held", [entry("four")]);
      expect((await store.sessions.load("web:held")).history).toEqual([entry("three"), entry("four")]);

      await other.sessions.reset("web:held");
      const reset = await store.sessions.load("web:held");
      expect(reset.history).toEqual([]);
      expect(reset.meta.generation).toBe(1);
      await other.sessions.append("web:held", [entry("five")]);
      expect((await store.sessions.load("web:held")).history).toEqual([entry("five")]);

      // What a load hands out is the caller's to change: the next load is not.
      const loaded = await store.sessions.load("web:held");
      loaded.history[0]!.content = "changed by the caller";
      expect((await store.sessions.load("web:held")).history).toEqual([entry("five")]);
    } finally {
      await other.close();
    }
  });

  it("keeps a session's last change once, as its score in sessions: an append writes no meta, and load and list report it", async () => {
    await store.sessions.append("web:a", [{ role: "user", content: "a1", at: 1 }]);
    const created = (await store.sessions.load("web:a")).meta;
    clock += 1_000;
    const counts = await commandsOn(redis, prefix, () => store.sessions.append("web:a", [{ role: "user", content: "a2", at: 2 }]));
    expect(counts.hset ?? 0).toBe(0);
    expect(counts.zadd).toBe(1);
    expect(counts.rpush).toBe(1);
    const { meta } = await store.sessions.load("web:a");
    expect(meta).toEqual({ ...created, updatedAt: created.updatedAt + 1_000 });
    expect((await store.sessions.list()).find((listed) => listed.key === "web:a")).toEqual(meta);
  });

  it("keeps an archive for archiveTtlMs after its last addition (compact or /new), and for ever without it", async () => {
    const kept = createRedisStore({ redis, prefix, now: () => clock, archiveTtlMs: 60_000 });
    const archive = (key: string, generation: number) => redisStoreKeys(prefix).session(key).archive(generation);
    try {
      await kept.sessions.append("web:old", [entry("one"), entry("two"), entry("three")]);
      await kept.sessions.compact("web:old", [entry("three")]);
      const afterCompact = await redis.pttl(archive("web:old", 0));
      expect(afterCompact).toBeGreaterThan(0);
      expect(afterCompact).toBeLessThanOrEqual(60_000);
      await kept.sessions.reset("web:old");
      expect(await redis.lrange(archive("web:old", 0), 0, -1)).toHaveLength(3);
      expect(await redis.pttl(archive("web:old", 0))).toBeGreaterThan(0);
      // A reset of a generation with no compaction renames the history into place: it expires too.
      await kept.sessions.append("web:old", [entry("four")]);
      await kept.sessions.reset("web:old");
      expect(await redis.pttl(archive("web:old", 1))).toBeGreaterThan(0);

      await store.sessions.append("web:kept", [entry("one"), entry("two")]);
      await store.sessions.compact("web:kept", [entry("two")]);
      expect(await redis.pttl(archive("web:kept", 0))).toBe(-1);
    } finally {
      await kept.close();
    }
  });

  it("rejects a prefix that would break the hash tag", () => {
    for (const bad of ["", "a{b", "a}b", "{a}"]) {
      expect(() => createRedisStore({ redis, prefix: bad })).toThrow(ConfigError);
    }
  });

  it("moves histories longer than one Lua unpack through compact and reset", async () => {
    const many = Array.from({ length: 2500 }, (_unused, index) => entry(`message ${index}`));
    await store.sessions.append("cli:many", many);
    await store.sessions.compact("cli:many", many.slice(-1200));
    expect((await store.sessions.load("cli:many")).history).toEqual(many.slice(-1200));
    await store.sessions.reset("cli:many");
    expect(await readRedisArchivedHistory({ redis, prefix }, "cli:many")).toEqual(many);
    expect((await store.sessions.load("cli:many")).meta.generation).toBe(1);
  });

  it("skips a stored entry it cannot read and still loads the rest", async () => {
    const skipped: { index: number; reason: string }[] = [];
    const watched = createRedisStore({ redis, prefix, now: () => clock, onSkippedEntry: (details) => skipped.push(details) });
    await watched.sessions.append("telegram:9", [entry("one")]);
    await redis.rpush(redisStoreKeys(prefix).session("telegram:9").history, "not json", '{"role":"system"}');
    await watched.sessions.append("telegram:9", [entry("two")]);
    expect((await watched.sessions.load("telegram:9")).history).toEqual([entry("one"), entry("two")]);
    expect(skipped).toEqual([expect.objectContaining({ index: 1, reason: "not JSON" }), expect.objectContaining({ index: 2 })]);
    await watched.close();
  });

  it("rejects an entry it could not load back, writing nothing", async () => {
    await store.sessions.append("cli:bad", [entry("good")]);
    const invalid = { role: "system", content: "nope", at: 1 } as unknown as HistoryEntry;
    await expect(store.sessions.append("cli:bad", [invalid])).rejects.toThrow(/invalid history entries/);
    await expect(store.sessions.compact("cli:bad", [invalid])).rejects.toThrow(/invalid history entries/);
    expect((await store.sessions.load("cli:bad")).history).toEqual([entry("good")]);
  });

  it("refuses work after close and leaves a shared connection open", async () => {
    await store.close();
    await expect(store.sessions.append("cli:x", [entry("late")])).rejects.toThrow(/closed/);
    expect(await redis.ping()).toBe("PONG");
  });

  it("closes its connection when it owns it", async () => {
    const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
    const owner = createRedisStore({ redis: connection, prefix, ownsConnection: true });
    await owner.sessions.append("cli:owned", [entry("one")]);
    await owner.close();
    await expect(connection.ping()).rejects.toThrow(/closed/i);
  });
});
