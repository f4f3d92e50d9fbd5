/**
 * The Redis commands CountBot uses, as an interface (BullMQ's habit): the bus, the store, the
 * gateway and the jobs' own keys depend on this, not on a client library. Only what src/ calls is
 * declared, with the argument shapes it calls them with; ioredis's `Redis` satisfies it
 * structurally (connectRedis's return type checks that).
 */
import { Cluster, Redis } from "ioredis";
import { ConfigError } from "../errors.js";

/** An argument of a command. */
export type RedisArgument = string | number;

/** Commands queued on a MULTI or a pipeline, sent by `exec`. */
export interface RedisBatch {
  set(key: string, value: string, expiryMode: "PX", milliseconds: number): RedisBatch;
  incr(key: string): RedisBatch;
  rpush(key: string, ...values: string[]): RedisBatch;
  ltrim(key: string, start: number, stop: number): RedisBatch;
  pexpire(key: string, milliseconds: number): RedisBatch;
  zcard(key: string): RedisBatch;
  xadd(key: string, ...args: RedisArgument[]): RedisBatch;
  xack(key: string, group: string, ...ids: string[]): RedisBatch;
  xdel(key: string, ...ids: string[]): RedisBatch;
  hgetall(key: string): RedisBatch;
  /** One `[error, reply]` per queued command; null when a watched key changed (unused here). */
  exec(): Promise<Array<[error: Error | null, reply: unknown]> | null>;
}

/** The commands CountBot sends, declared as it sends them (see the top of this file). */
export interface RedisClient {
  evalsha(sha: string, keyCount: number, ...keysAndArgs: RedisArgument[]): Promise<unknown>;
  eval(script: string, keyCount: number, ...keysAndArgs: RedisArgument[]): Promise<unknown>;

  get(key: string): Promise<string | null>;
  mget(...keys: string[]): Promise<Array<string | null>>;
  set(key: string, value: string): Promise<"OK">;
  set(key: string, value: string, expiryMode: "PX", milliseconds: number): Promise<"OK">;
  set(key: string, value: string, expiryMode: "PX", milliseconds: number, condition: "NX"): Promise<"OK" | null>;
  /** Sets unless set, and says what was there: null when this call set it (Redis 7: NX with GET). */
  set(key: string, value: string, expiryMode: "PX", milliseconds: number, condition: "NX", get: "GET"): Promise<string | null>;
  exists(...keys: string[]): Promise<number>;
  del(...keys: string[]): Promise<number>;

  hget(key: string, field: string): Promise<string | null>;
  hmget(key: string, ...fields: string[]): Promise<Array<string | null>>;
  hgetall(key: string): Promise<Record<string, string>>;
  hexists(key: string, field: string): Promise<number>;
  hdel(key: string, ...fields: string[]): Promise<number>;
  hset(key: string, field: string, value: string): Promise<number>;
  lrange(key: string, start: number, stop: number): Promise<string[]>;
  blpop(key: string, timeoutSeconds: number): Promise<[key: string, value: string] | null>;
  zrange(key: string, start: number, stop: number): Promise<string[]>;
  /** Member, score, member, score, ... */
  zrange(key: string, start: number, stop: number, withScores: "WITHSCORES"): Promise<string[]>;
  zrevrange(key: string, start: number, stop: number): Promise<string[]>;
  zrangebyscore(key: string, min: RedisArgument, max: RedisArgument): Promise<string[]>;
  zcard(key: string): Promise<number>;
  zcount(key: string, min: RedisArgument, max: RedisArgument): Promise<number>;
  llen(key: string): Promise<number>;

  xadd(key: string, ...args: RedisArgument[]): Promise<string | null>;
  xrange(key: string, start: string, end: string): Promise<Array<[id: string, fields: string[]]>>;
  xrevrange(key: string, end: string, start: string, countToken: "COUNT", count: number): Promise<Array<[id: string, fields: string[]]>>;
  xgroup(subcommand: "CREATE", key: string, group: string, id: string, mkstream: "MKSTREAM"): Promise<unknown>;
  xautoclaim(key: string, group: string, consumer: string, minIdleMs: number, start: string, countToken: "COUNT", count: number): Promise<unknown[]>;
  xreadgroup(
    groupToken: "GROUP",
    group: string,
    consumer: string,
    countToken: "COUNT",
    count: number,
    blockToken: "BLOCK",
    milliseconds: number,
    streamsToken: "STREAMS",
    ...streamsThenIds: string[]
  ): Promise<unknown[] | null>;

  multi(): RedisBatch;
  pipeline(): RedisBatch;

  publish(channel: string, message: string): Promise<number>;
  subscribe(...channels: string[]): Promise<unknown>;
  on(event: "message", listener: (channel: string, message: string) => void): unknown;

  ping(): Promise<"PONG">;
  info(section: string): Promise<string>;
  /** How many replicas have every write this connection made so far, waiting up to `timeoutMs` for `numReplicas`. */
  wait(numReplicas: number, timeoutMs: number): Promise<number>;
  config(subcommand: "GET", parameter: string): Promise<unknown>;

  /** `ready` once connected and usable; anything else while connecting or reconnecting (ioredis's status). */
  readonly status?: string;
  on(event: "ready", listener: () => void): unknown;

  /** Another connection to the same server (for blocking reads and subscriptions). */
  duplicate(): RedisClient;
  /** Closes after the replies of the commands already sent. */
  quit(): Promise<"OK">;
  /** Closes at once. */
  disconnect(): void;
}

/**
 * ioredis's own client, for the modules that hand a connection to BullMQ (src/jobs, and the
 * composition root that feeds them): BullMQ's options take an ioredis instance, and BullMQ uses far
 * more of it than RedisClient declares (duplicate with options, defineCommand, status events).
 */
export type BullmqConnection = Redis;

/** One connection, two views: RedisClient for CountBot's modules, BullmqConnection for BullMQ. */
export type RedisConnection = RedisClient & BullmqConnection;

/**
 * A connection for `url` that fails fast on start-up instead of queueing commands forever. Its
 * return type is the proof that ioredis's `Redis` satisfies RedisClient: a command declared there
 * that ioredis lacks, or declares differently, fails to type-check here.
 */
export function connectRedis(
  url: string,
  options: { name?: string; autoPipelining?: boolean; sentinels?: SentinelOptions; cluster?: Array<{ host: string; port: number }> } = {},
): RedisConnection {
  if (options.cluster) return connectToCluster(url, options.cluster, options);
  if (options.sentinels) return connectThroughSentinels(url, options.sentinels, options);
  return new Redis(url, {
    connectionName: options.name,
    // Blocking commands (BLPOP, XREADGROUP BLOCK) must not be cut off by a command timeout.
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    lazyConnect: false,
    // Commands issued in one turn of the event loop leave in one write (one syscall, one packet):
    // many turns in flight issue many commands at once. Not for connections handed to BullMQ.
    enableAutoPipelining: options.autoPipelining ?? false,
  });
}

/** How `redis.*` says to reach Redis beyond its URL: through sentinels, or as a cluster (not both). */
export function topologyOf(redis: {
  sentinels?: Array<{ host: string; port: number }>;
  sentinelMaster: string;
  cluster?: Array<{ host: string; port: number }>;
  acceptAfterReplicas?: number;
}): {
  sentinels?: SentinelOptions;
  cluster?: Array<{ host: string; port: number }>;
} {
  if (redis.sentinels && redis.cluster) throw new ConfigError("redis.sentinels and redis.cluster exclude each other: a cluster fails over by itself", "redis.cluster");
  // WAIT confirms the writes of one connection to one node; a cluster client's writes go to every
  // shard, and its WAIT to one of them: the confirmation would be of another shard's writes.
  if (redis.cluster && (redis.acceptAfterReplicas ?? 0) > 0) {
    throw new ConfigError("redis.acceptAfterReplicas is not supported with redis.cluster: WAIT would confirm one shard's writes, not the shard each message went to (use redis.sentinels for confirmed writes, or 0)", "redis.acceptAfterReplicas");
  }
  return { ...(redis.sentinels ? { sentinels: { nodes: redis.sentinels, master: redis.sentinelMaster } } : {}), ...(redis.cluster ? { cluster: redis.cluster } : {}) };
}

/** Proof that ioredis's Cluster client satisfies RedisClient as well (fails to compile otherwise). */
const clusterIsClient: Cluster extends RedisClient ? true : never = true;
void clusterIsClient;

/**
 * A Redis Cluster client. CountBot's modules see it as RedisClient (checked above); BullMQ takes a
 * Cluster wherever it takes a Redis connection, hence the one cast. Commands with no key (INFO,
 * CONFIG, PING) go to any node; every script's keys share one hash tag, so one slot.
 */
function connectToCluster(url: string, nodes: Array<{ host: string; port: number }>, options: { name?: string; autoPipelining?: boolean }): RedisConnection {
  const parsed = new URL(url);
  const cluster = new Cluster(nodes, {
    enableAutoPipelining: options.autoPipelining ?? false,
    // Auto-pipelining groups a tick's commands by the shard of each one's first key. XGROUP's key
    // follows its subcommand, which ioredis does not find: it grouped XGROUP CREATE by the slot of
    // "CREATE", and the shard it reached answered MOVED, raw whenever another write shared that
    // pipeline (a gateway then failed to start). Sent on its own, a MOVED is followed.
    autoPipeliningIgnoredCommands: ["xgroup"],
    enableReadyCheck: true,
    redisOptions: {
      connectionName: options.name,
      maxRetriesPerRequest: null,
      ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
      ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    },
  });
  return cluster as unknown as RedisConnection;
}

/** Redis Sentinel: the nodes to ask, and the name they monitor the primary under. */
export interface SentinelOptions {
  nodes: Array<{ host: string; port: number }>;
  master: string;
}

/**
 * A connection to the primary the sentinels name, followed through a failover: ioredis asks the
 * sentinels again on every reconnect, and a command refused with READONLY (the primary this
 * connection reached was demoted to a replica: a failover with the old primary still up) drops the
 * connection and is sent again on the new primary. `url` gives the password, user and database
 * only.
 *
 * Not ioredis's `failoverDetector`: when the sentinels announce the new primary while a client is
 * reconnecting (its primary was killed, it is asking them again), the detector's disconnect lands
 * in the middle of the attempt and the client ends for good (status `end`: every later command
 * fails with "Connection is closed."), which the failover test caught on loaded machines.
 */
function connectThroughSentinels(url: string, sentinels: SentinelOptions, options: { name?: string; autoPipelining?: boolean }): RedisConnection {
  const parsed = new URL(url);
  const database = Number(parsed.pathname.slice(1) || 0);
  return new Redis({
    sentinels: sentinels.nodes,
    name: sentinels.master,
    reconnectOnError: (error) => (/\bREADONLY\b/.test(error.message) ? 2 : false),
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    db: Number.isInteger(database) ? database : 0,
    connectionName: options.name,
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    lazyConnect: false,
    enableAutoPipelining: options.autoPipelining ?? false,
  });
}

/**
 * Resolves once the connection is ready; rejects after `timeoutMs` with what went wrong (the
 * server refused, the name did not resolve, ...), so a process that cannot reach Redis says so
 * and exits instead of retrying forever.
 */
export function waitUntilReady(redis: Pick<Redis, "status" | "once" | "on" | "off">, timeoutMs: number): Promise<void> {
  if (redis.status === "ready") return Promise.resolve();
  return new Promise((resolve, reject) => {
    let lastError: Error | undefined;
    const onError = (error: Error) => void (lastError = error);
    const timer = setTimeout(() => {
      redis.off("error", onError);
      reject(new Error(`no answer within ${Math.round(timeoutMs / 1000)} s${lastError ? ` (${(lastError as NodeJS.ErrnoException).code ?? lastError.message})` : ""}`));
    }, timeoutMs);
    redis.on("error", onError);
    redis.once("ready", () => {
      clearTimeout(timer);
      redis.off("error", onError);
      resolve();
    });
  });
}

/** The URL without its password, for messages. */
export function redactedRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "****";
    return parsed.toString();
  } catch {
    return "(an unparsable redis.url)";
  }
}

/** `{prefix}`: the hash tag of deployment-wide keys; the whole convention is in ./keys.ts. */
export { hashTag } from "./keys.js";
