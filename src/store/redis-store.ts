/**
 * The Redis store: sessions shared by every gateway and worker of a deployment.
 *
 * Layout, every key under the hash tag `{prefix}` so one deployment lives in one cluster slot:
 * - `{p}:session:<key>:meta` HASH `key`, `createdAt`, `updatedAt` (as of creation, the last compact
 *   or reset: an append does not write it), `generation`
 * - `{p}:session:<key>:history` LIST of the current generation's entries (JSON), oldest first
 * - `{p}:session:<key>:archive:<generation>` LIST of what `compact` and `reset` dropped from that
 *   generation, oldest first
 * - `{p}:sessions` ZSET session key → updatedAt, for `list`: the session's last change, which `load`
 *   and `list` report (an append updates only this, one command instead of two)
 * - `{p}:pairing:*` DM pairing (./redis-pairing.ts)
 * - `{p}:task:<id>`, `{p}:tasks*` subagent tasks (./redis-tasks.ts)
 * - `{p}:team:<id>`, `{p}:teams:names` agent teams (./redis-teams.ts)
 * - `{p}:wfrun:<id>`, `{p}:wfruns*` workflow runs and their nodes (./redis-workflow-runs.ts)
 *
 * The tag is the key's FIRST `{...}` and every key starts with it, so braces in a session key
 * cannot move a key to another slot. The session key is the last free-form part before a fixed
 * suffix (`:meta`, `:history`, `:archive:<digits>`), so two keys can never share a Redis key.
 *
 * Semantics match the file store: an unknown key loads as an empty generation-0 session and is not
 * stored; `compact` archives what it drops (entries compared by value, each kept entry matching
 * one); `reset` archives the history and bumps the generation. Each write is one Lua script
 * (./lua), so it is atomic across processes; `append`, `compact` and `reset` with a fence check the
 * bus's lease (`{p}:own`, `{p}:workers`) in the same script and write nothing when it is gone.
 *
 * Entries are stored as canonical JSON (object keys sorted), so `compact` recognizes a kept entry
 * whatever the key order of the object the caller passes.
 */
import { randomUUID } from "node:crypto";
import { busKeys } from "../bus/redis-keys.js";
import { BusError, ConfigError } from "../errors.js";
import { hashTag, type RedisClient } from "../redis/client.js";
import { partitionOf } from "../redis/keys.js";
import { partitionedSessions } from "./partitioned-sessions.js";
import { runScript, loadScript } from "../redis/scripts.js";
import { createKeyedQueue } from "./file-io.js";
import { createRedisPairingStore } from "./redis-pairing.js";
import { createRedisTaskStore } from "./redis-tasks.js";
import { createRedisTeamStore } from "./redis-teams.js";
import { createRedisRunStore } from "./redis-workflow-runs.js";
import { HistoryAppends } from "./redis-history-appends.js";
import { HeldHistories, SessionLoads } from "./redis-session-loads.js";
import { type Fence, type HistoryEntry, HistoryEntrySchema, type SessionMeta, type SessionSnapshot, type SessionStore, type Store, canonicalEntryJson, validEntries } from "./store.js";
import { forgetOldest } from "../bounded.js";

export { canonicalEntryJson } from "./store.js";

export interface RedisStoreOptions {
  /** Commands; may be shared with the bus (the store sends no blocking commands). */
  redis: RedisClient;
  /** Key prefix: keys live under the hash tag `{prefix}`, the same one the bus uses. */
  prefix: string;
  /**
   * Clock in ms since epoch, for timestamps and for the fence's lease-expiry check (the bus stamps
   * lease expiries from its host's clock too); injected so tests are deterministic.
   */
  now?: () => number;
  /** Close `redis` too when the store closes. */
  ownsConnection?: boolean;
  /** Told about each stored entry skipped on load because it is not valid JSON or not an entry. */
  onSkippedEntry?: (details: { key: string; index: number; reason: string }) => void;
  /**
   * The bus's partitions (`redis.partitions`): above 1, a session's keys live under its partition's
   * tag `{prefix:p<k>}`, beside its lease, and `sessions` is one index per partition.
   */
  partitions?: number;
  /** How long an archive of dropped history is kept after its last addition (ms); 0 or unset: for ever. */
  archiveTtlMs?: number;
}

/** The keys of one session. */
export interface SessionKeys {
  meta: string;
  history: string;
  archive(generation: number): string;
}

export interface RedisStoreKeys {
  /** ZSET session key → updatedAt. */
  sessions: string;
  session(key: string): SessionKeys;
  /** What every session's keys start with (`<prefix><key>:meta`, ...), for the batched append which builds them. */
  sessionPrefix: string;
  /** Marker of one write (by its id), so the write replayed is not done twice. */
  write(id: string): string;
}

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  loadMany: loadScript(scriptsDirectory, "load-sessions-many-1.lua"),
  appendMany: loadScript(scriptsDirectory, "append-history-many-4.lua"),
  compact: loadScript(scriptsDirectory, "compact-history-6.lua"),
  reset: loadScript(scriptsDirectory, "reset-session-6.lua"),
};

/** Sessions whose meta `list` asks for in one batch of pipelined commands. */
const LIST_BATCH = 500;

/** Where the sessions under `prefix` are kept, for a bus that appends a turn's history with its ack (its keys share the tag). */
export function redisHistoryKeys(prefix: string): { sessions: string; sessionPrefix: string } {
  const keys = redisStoreKeys(prefix);
  return { sessions: keys.sessions, sessionPrefix: keys.sessionPrefix };
}

/** Throws a ConfigError for a prefix that would break the hash tag. */
function checkPrefix(prefix: string): void {
  if (prefix.length === 0 || /[{}]/.test(prefix)) {
    throw new ConfigError(`redis prefix ${JSON.stringify(prefix)} must be non-empty and free of { and }: it becomes the hash tag`, "redis.prefix");
  }
}

export function redisStoreKeys(prefix: string): RedisStoreKeys {
  checkPrefix(prefix);
  const tag = hashTag(prefix);
  return {
    sessions: `${tag}:sessions`,
    sessionPrefix: `${tag}:session:`,
    write: (id) => `${tag}:write:${id}`,
    session(key) {
      const base = `${tag}:session:${key}`;
      return { meta: `${base}:meta`, history: `${base}:history`, archive: (generation) => `${base}:archive:${generation}` };
    },
  };
}


function checkKey(key: string): void {
  if (key.length === 0) throw new Error("a session key must not be empty");
}

function fenceToken(fence: Fence | undefined): string {
  if (fence === undefined) return "";
  if (!Number.isSafeInteger(fence.token)) throw new BusError(`fencing token ${fence.token} is not an integer`, "invalid");
  return String(fence.token);
}

function isLeaseLost(error: unknown): error is Error {
  return error instanceof Error && error.message.startsWith("LEASE_LOST");
}

function parseMeta(key: string, fields: Record<string, string | null | undefined>): SessionMeta | undefined {
  if (fields.createdAt == null && fields.updatedAt == null && fields.generation == null) return undefined;
  const createdAt = Number(fields.createdAt ?? fields.updatedAt ?? 0);
  return { key, createdAt, updatedAt: Number(fields.updatedAt ?? createdAt), generation: Number(fields.generation ?? 0) };
}

function pairs(flat: string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let index = 0; index + 1 < flat.length; index += 2) record[flat[index]!] = flat[index + 1]!;
  return record;
}

type SkippedEntryListener = RedisStoreOptions["onSkippedEntry"];

/**
 * Stored entry texts already parsed in this process, and what they parsed to: a session's history
 * is read whole on every turn, and most of it is the same text as last turn. Bounded; the oldest
 * text goes first.
 */
class ParsedEntries {
  private readonly entries = new Map<string, HistoryEntry>();

  constructor(private readonly limit: number) {}

  /** A copy of what `text` parsed to (callers may change what they get), or undefined. */
  get(text: string): HistoryEntry | undefined {
    const entry = this.entries.get(text);
    return entry && { ...entry };
  }

  set(text: string, entry: HistoryEntry): void {
    this.entries.set(text, { ...entry });
    forgetOldest(this.entries, this.limit);
  }
}

/** Entry texts remembered parsed: a few thousand chats' recent turns. */
const PARSED_ENTRIES_KEPT = 20_000;

function parseEntries(key: string, texts: string[], onSkipped: SkippedEntryListener, parsed?: ParsedEntries, from = 0): HistoryEntry[] {
  const entries: HistoryEntry[] = [];
  texts.forEach((text, position) => {
    const index = from + position;
    const known = parsed?.get(text);
    if (known) {
      entries.push(known);
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      onSkipped?.({ key, index, reason: "not JSON" });
      return;
    }
    const result = HistoryEntrySchema.safeParse(value);
    if (result.success) {
      entries.push(result.data);
      parsed?.set(text, result.data);
    } else onSkipped?.({ key, index, reason: "not a history entry" });
  });
  return entries;
}

/** Runs a write that may be fenced; a LEASE_LOST reply becomes BusError("lease-lost"). */
async function fencedWrite(key: string, fence: Fence | undefined, run: (token: string) => Promise<unknown>): Promise<void> {
  const token = fenceToken(fence);
  try {
    await run(token);
  } catch (error) {
    if (isLeaseLost(error)) {
      throw new BusError(`lease on ${key} (token ${token}) is no longer held: ${error.message.slice("LEASE_LOST ".length)}`, "lease-lost", {
        cause: error,
      });
    }
    throw error;
  }
}

/** Every session's meta, sorted by key, read in pipelined batches. */
async function listSessions(redis: RedisClient, keys: ReturnType<typeof redisStoreKeys>): Promise<SessionMeta[]> {
  // Member, score (its last change), member, score, ...
  const scored = await redis.zrange(keys.sessions, 0, -1, "WITHSCORES");
  const members = scored.filter((_, index) => index % 2 === 0);
  const metas: SessionMeta[] = [];
  for (let start = 0; start < members.length; start += LIST_BATCH) {
    const batch = members.slice(start, start + LIST_BATCH);
    // Sent together without awaiting each: ioredis pipelines them on the one connection.
    const replies = await Promise.all(batch.map((key) => redis.hmget(keys.session(key).meta, "createdAt", "updatedAt", "generation")));
    replies.forEach(([createdAt, updatedAt, generation], index) => {
      const meta = parseMeta(batch[index]!, { createdAt, updatedAt: scored[2 * (start + index) + 1] ?? updatedAt, generation });
      if (meta) metas.push(meta);
    });
  }
  return metas.sort((left, right) => (left.key < right.key ? -1 : left.key > right.key ? 1 : 0));
}

/**
 * The keys of one write. Its own `write:<id>` marker makes the write happen once even when
 * ioredis resends it after the connection died before the reply came.
 */
function writeKeysOf(keys: ReturnType<typeof redisStoreKeys>, lease: ReturnType<typeof busKeys>, key: string): string[] {
  const session = keys.session(key);
  return [session.meta, session.history, keys.sessions, lease.own, lease.workers, keys.write(randomUUID())];
}

/** What the session stores of one Redis store (one per partition) share. */
interface SessionsShared {
  options: RedisStoreOptions;
  queue: ReturnType<typeof createKeyedQueue>;
  parsedEntries: ParsedEntries;
  heldHistories: HeldHistories;
  isClosed: () => boolean;
}

/** The sessions under the hash tag `{prefix}` (a whole deployment's, or one partition's). */
function redisSessions(prefix: string, { options, queue, parsedEntries, heldHistories, isClosed }: SessionsShared): SessionStore {
  const { redis } = options;
  const now = options.now ?? Date.now;
  const keys = redisStoreKeys(prefix);
  const lease = busKeys(prefix);

  function serialized<T>(key: string, operation: () => Promise<T>): Promise<T> {
    if (isClosed()) return Promise.reject(new Error("the redis store is closed"));
    try {
      checkKey(key);
    } catch (error) {
      return Promise.reject(error);
    }
    return queue.run(key, operation);
  }

  const writeKeys = (key: string) => writeKeysOf(keys, lease, key);
  const archiveTtlMs = options.archiveTtlMs ?? 0;

  // The scripts judge the lease by Redis's clock unless a clock was injected (tests): a write that
  // reaches Redis late must not be judged with the time it was sent.
  const scriptNow = (): number | string => (options.now ? now() : "");
  // Appends batched per turn of the event loop: one script call for the turns saved in one moment.
  const appends = new HistoryAppends({
    redis,
    script: scripts.appendMany,
    keys: { sessions: keys.sessions, own: lease.own, workers: lease.workers, write: keys.write, sessionPrefix: keys.sessionPrefix },
    now: scriptNow,
  });

  const loads = new SessionLoads({
    redis,
    script: scripts.loadMany,
    sessionPrefix: keys.sessionPrefix,
    sessions: keys.sessions,
    parse: (key, texts, from) => parseEntries(key, texts, options.onSkippedEntry, parsedEntries, from),
    held: heldHistories,
  });

  const sessions: SessionStore = {
    load(key) {
      return serialized(key, async (): Promise<SessionSnapshot> => {
        const { metaFields, history, updatedAt } = await loads.load(key);
        const time = now();
        const meta = parseMeta(key, { ...pairs(metaFields), ...(updatedAt === null ? {} : { updatedAt }) }) ?? { key, createdAt: time, updatedAt: time, generation: 0 };
        return { meta, history };
      });
    },

    append(key, input, fence) {
      return serialized(key, async () => {
        const entries = validEntries(input);
        // Without a fence there is nothing to check and nothing to write; with one, the caller
        // still learns that its lease is gone.
        if (entries.length === 0 && fence === undefined) return;
        await fencedWrite(key, fence, (token) => appends.append(key, token, entries.map(canonicalEntryJson)));
      });
    },

    compact(key, input, fence) {
      return serialized(key, async () => {
        const keep = validEntries(input);
        await fencedWrite(key, fence, (token) => runScript(redis, scripts.compact, writeKeys(key), [key, scriptNow(), token, archiveTtlMs, ...keep.map(canonicalEntryJson)]));
      });
    },

    reset(key, fence) {
      return serialized(key, async () => {
        await fencedWrite(key, fence, (token) => runScript(redis, scripts.reset, writeKeys(key), [key, scriptNow(), token, archiveTtlMs]));
      });
    },

    async list() {
      if (isClosed()) throw new Error("the redis store is closed");
      return listSessions(redis, keys);
    },
  };
  return sessions;
}

export function createRedisStore(options: RedisStoreOptions): Store {
  const { redis } = options;
  // Lua makes each write atomic across processes; this queue keeps one process's writes to a key
  // in call order even when a script must be re-sent after NOSCRIPT (a fresh or flushed Redis).
  const queue = createKeyedQueue();
  const parsedEntries = new ParsedEntries(PARSED_ENTRIES_KEPT);
  const pairing = createRedisPairingStore({ redis, prefix: options.prefix });
  const tasks = createRedisTaskStore({ redis, prefix: options.prefix });
  const teams = createRedisTeamStore({ redis, prefix: options.prefix });
  const runs = createRedisRunStore({ redis, prefix: options.prefix });
  let closed = false;
  const shared: SessionsShared = { options, queue, parsedEntries, heldHistories: new HeldHistories(), isClosed: () => closed };
  const partitions = options.partitions ?? 1;
  const sessions =
    partitions <= 1
      ? redisSessions(options.prefix, shared)
      : partitionedSessions(Array.from({ length: partitions }, (_unused, index) => redisSessions(`${options.prefix}:p${index}`, shared)));

  return {
    sessions,
    tasks,
    pairing,
    teams,
    runs,
    async close() {
      closed = true;
      await pairing.close();
      await tasks.close();
      await teams.close();
      await runs.close();
      await queue.drain();
      if (options.ownsConnection) await redis.quit().catch(() => undefined);
    },
  };
}

/**
 * Everything archived for a key (by `compact` and `reset`), oldest first. For operators and tests:
 * the Store contract promises dropped entries stay readable but has no read method for them.
 */
export async function readRedisArchivedHistory(options: Pick<RedisStoreOptions, "redis" | "prefix" | "partitions">, key: string): Promise<HistoryEntry[]> {
  const partitions = options.partitions ?? 1;
  const session = redisStoreKeys(partitions <= 1 ? options.prefix : `${options.prefix}:p${partitionOf(key, partitions)}`).session(key);
  const generation = Number((await options.redis.hget(session.meta, "generation")) ?? 0);
  const archives = await Promise.all(Array.from({ length: generation + 1 }, (_unused, index) => options.redis.lrange(session.archive(index), 0, -1)));
  return archives.flatMap((texts) => parseEntries(key, texts, undefined));
}
