/**
 * The one place that decides "memory or Redis": everything shared between processes (bus, store,
 * long-term memory, tool history, the audit log, the web page's kept replies, job queues, the scheduler, leader election, counters) comes from here, built
 * once per process. No other module chooses.
 */
import { randomUUID } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { hostname } from "node:os";
import path from "node:path";
import type { RedisConnection } from "../redis/client.js";
import type { Logger } from "pino";
import { type MemoryScope, type MemoryStore, createFileMemoryStore } from "../memory/memory.js";
import { createRedisMemoryStore } from "../memory/redis-memory.js";
import { type ElectLeader, electLeader, soleLeader } from "../bus/leader.js";
import { createMemoryBus } from "../bus/memory-bus.js";
import type { MessageBus } from "../bus/message-bus.js";
import { createRedisBusOf } from "../bus/partitioned-bus.js";
import type { ResolvedConfig } from "../config/schema.js";
import { ConfigError, errorMessage } from "../errors.js";
import type { ReadinessCheck } from "../api/server.js";
import { createBullmqQueue } from "../jobs/bullmq-queue.js";
import { createBullmqScheduler } from "../jobs/cron/bullmq-scheduler.js";
import { createInProcessScheduler } from "../jobs/cron/in-process-scheduler.js";
import type { Scheduler } from "../jobs/cron/scheduler.js";
import { createInProcessQueue } from "../jobs/in-process-queue.js";
import type { JobQueue, JobQueueEvents } from "../jobs/job-queue.js";
import type { ChannelHealthJson } from "../gateway/channel-health.js";
import { type QuotaStore, createMemoryQuotaStore } from "../gateway/quota-store.js";
import { createRedisQuotaStore } from "../gateway/redis-quota-store.js";
import { checkRedis } from "../redis/checks.js";
import { type WorkspaceCheck, type WorkspaceMarker, checkWorkspaceMarkers, placeWorkspaceMarker } from "./workspace-markers.js";
import { type BullmqConnection, connectRedis, hashTag, redactedRedisUrl, topologyOf, waitUntilReady } from "../redis/client.js";
import type { BudgetLedger } from "../store/budget-ledger.js";
import { createFileStore } from "../store/file-store.js";
import { createMemoryBudgetLedger } from "../store/memory-budget-ledger.js";
import { createRedisBudgetLedger } from "../store/redis-budget-ledger.js";
import { createRedisStore, redisHistoryKeys } from "../store/redis-store.js";
import { type ChatEventLog, createMemoryChatEventLog } from "../store/chat-event-log.js";
import { createRedisChatEventLog } from "../store/redis-chat-event-log.js";
import type { Store } from "../store/store.js";
import { type AuditLineOptions, type AuditLog, createFileAuditLog } from "../tools/audit-log.js";
import { createRedisAuditLog } from "../tools/redis-audit-log.js";
import { createRedisToolHistory } from "../tools/redis-tool-history.js";
import { type ToolHistory, createFileToolHistory } from "../tools/tool-history.js";

/** Counts shared by every process of the deployment (the heartbeat's daily cap). */
export interface Counters {
  increment(key: string, ttlMs: number): Promise<void>;
  get(key: string): Promise<number>;
}

/** A process of the deployment, as `countbot status` lists it. */
export interface ProcessRecord {
  id: string;
  role: string;
  host: string;
  pid: number;
  startedAt: number;
  /** When it last said it is alive. */
  seenAt: number;
  /** A gateway's channels and their health, as it last said. */
  channels?: ChannelHealthJson[];
}

/** A process that has not said it is alive for this long is gone. */
const PROCESS_TTL_MS = 30_000;
const ANNOUNCE_EVERY_MS = 10_000;

/** Builds a job queue; the composition root wires its consumers. */
export type QueueFactory = <Data>(name: string, events?: JobQueueEvents<Data>) => JobQueue<Data>;

/** What a memory store is built with: the workspace (for `MEMORY.md` files) and the configured scope. */
export interface MemoryOptions {
  workspace: string;
  scope: MemoryScope;
  maxBytes?: number;
  /** A non-default agent profile's id: its memory apart from the others' (files: its own workspace already). */
  namespace?: string;
}

export interface Infrastructure {
  /** `memory`: one process (in-memory bus, file store); `redis`: gateways and workers share Redis. */
  kind: "memory" | "redis";
  /** Redis deployments: the connection BullMQ tools (the queue dashboard) are handed. */
  bullmq?: { connection: BullmqConnection; prefix: string };
  /** Redis deployments: leaves this worker's marker in its workspace, to tell whether workers share one (see workspace-markers.ts). */
  markWorkspace?(workspace: string): Promise<WorkspaceMarker>;
  /** Redis deployments: which other workers' markers `workspace` lacks. */
  checkWorkspace?(workspace: string): Promise<WorkspaceCheck>;
  bus: MessageBus;
  store: Store;
  /** Long-term memory: `MEMORY.md` files in the workspace, or Redis (shared by every worker). */
  memory(options: MemoryOptions): MemoryStore;
  /** Each session's tool calls: JSONL files under the data directory, or a bounded list per session in Redis. */
  toolHistory(options?: { secrets?: readonly string[] }): ToolHistory;
  /**
   * The audit log: a rotated file under the data directory (one process), or one trimmed Redis
   * stream that every process appends to (see the README, "What state lives where").
   */
  auditLog(options: AuditLineOptions): AuditLog;
  /**
   * What each budget spent and holds, and the usage report's counts: in this process (kept in
   * `<dataDir>/budgets/ledger.json` across restarts), or in Redis (shared by every worker).
   */
  budgetLedger: BudgetLedger;
  /** A channel's log of the events its chats must not miss (the web page's finals): in this process, or in Redis. */
  chatEvents(channel: string): ChatEventLog;
  leaseTtlMs: number;
  queue: QueueFactory;
  /** Scheduled messages: BullMQ job schedulers, or a file-backed scheduler in this process. */
  scheduler(): Scheduler;
  /**
   * The send budgets of one platform account (the send governor's store): in this process, or in
   * Redis, where every gateway of the bot takes from the same windows.
   */
  quotaStore(channel: string, account: string): QuotaStore;
  /** Leader election: one process at a time leads a name (always this one in memory). */
  elect: ElectLeader;
  counters: Counters;
  /** Readiness of what is shared (Redis answers PING). */
  checks(): Promise<Record<string, ReadinessCheck>>;
  /**
   * Says "this process is alive" every few seconds, for `countbot status` (over Redis; one process
   * in memory has nobody to tell). Returns the stop.
   */
  announce(role: string, details?: () => Pick<ProcessRecord, "channels">): () => Promise<void>;
  /** The processes that announced themselves lately, newest first. */
  processes(): Promise<ProcessRecord[]>;
  close(): Promise<void>;
}

export interface InfrastructureOptions {
  /** `gateway` and `worker` only make sense with Redis: fail at start-up without it. */
  requireRedis?: string;
  /** Use the in-memory bus and file store even when Redis is configured (`countbot chat`). */
  embedded?: boolean;
  now?: () => number;
}

export async function createInfrastructure(config: ResolvedConfig, logger: Logger, options: InfrastructureOptions = {}): Promise<Infrastructure> {
  if (!config.redis.url || options.embedded) {
    if (options.requireRedis) {
      throw new ConfigError(`\`countbot ${options.requireRedis}\` needs Redis: set REDIS_URL or redis.url (or run \`countbot start\` for one process)`, "redis.url");
    }
    return createMemoryInfrastructure(config, logger, options.now);
  }
  return createRedisInfrastructure(config, logger, options.now, options.requireRedis);
}

/**
 * A turn's lease when `redis.leaseTtlMs` is unset. Over Redis it is how fast another worker takes a
 * dead one's chats over. In one process there is no other worker, and a stalled event loop stalls
 * every turn alike, so a short lease would only start a turn again beside the one that stalled.
 */
const REDIS_LEASE_TTL_MS = 2_000;
const MEMORY_LEASE_TTL_MS = 30_000;

async function createMemoryInfrastructure(config: ResolvedConfig, logger: Logger, now: (() => number) | undefined): Promise<Infrastructure> {
  const leaseTtlMs = config.redis.leaseTtlMs ?? MEMORY_LEASE_TTL_MS;
  await mkdir(config.dataDir, { recursive: true });
  const bus = createMemoryBus({ debounceMs: config.agent.debounceMs, leaseTtlMs, now, maxQueued: config.agent.maxQueuedMessages });
  const store = createFileStore({
    dataDir: config.dataDir,
    now,
    // Fenced writes are checked against the bus's lease, which reads only a claim's session key and token.
    holdsLease: (sessionKey, fence) => bus.holds({ sessionKey, token: fence.token, messages: [], attempt: 0 }),
  });
  const budgetLedger = createMemoryBudgetLedger({ file: ledgerFile(config), onError: (error) => logger.warn({ err: error }, "the budget ledger file could not be written") });
  const clock = now ?? Date.now;
  const counts = new Map<string, { value: number; expiresAt: number }>();
  return {
    kind: "memory",
    bus,
    store,
    memory: ({ namespace: _namespace, ...options }) => createFileMemoryStore({ ...options, now }),
    toolHistory: (options = {}) => createFileToolHistory({ directory: path.join(config.dataDir, "tool-history"), secrets: options.secrets, now }),
    auditLog: (options) => createFileAuditLog({ ...fileAuditOptions(config), now, ...options }),
    budgetLedger,
    chatEvents: () => createMemoryChatEventLog({ now }),
    leaseTtlMs,
    queue: (name, events) => createInProcessQueue({ name, events, logger, now }),
    scheduler: () => createInProcessScheduler({ file: path.join(config.dataDir, "cron", "jobs.json"), now, logger }),
    quotaStore: () => createMemoryQuotaStore({ now }),
    elect: soleLeader,
    counters: {
      async increment(key, ttlMs) {
        const current = counts.get(key);
        const live = current && current.expiresAt > clock() ? current.value : 0;
        counts.set(key, { value: live + 1, expiresAt: clock() + ttlMs });
      },
      async get(key) {
        const current = counts.get(key);
        return current && current.expiresAt > clock() ? current.value : 0;
      },
    },
    checks: async () => ({}),
    announce: () => async () => undefined,
    processes: async () => [],
    close: async () => void (await Promise.all([bus.close(), store.close(), budgetLedger.close()])),
  };
}

async function createRedisInfrastructure(config: ResolvedConfig, logger: Logger, now: (() => number) | undefined, role: string | undefined): Promise<Infrastructure> {
  const { prefix } = config.redis;
  const leaseTtlMs = config.redis.leaseTtlMs ?? REDIS_LEASE_TTL_MS;
  const url = config.redis.url!;
  // Named by role, so CLIENT LIST (and the benchmarks' command counts) tell gateways from workers.
  const name = role ? `countbot-${role}` : "countbot";
  const topology = topologyOf(config.redis);
  const redis: RedisConnection = connectRedis(url, { name, autoPipelining: true, ...topology });
  // BullMQ gets a connection of its own, without auto-pipelining (which its scripts are not known to
  // bear), made when a queue first needs it.
  let jobsConnection: RedisConnection | undefined;
  const jobs = (): RedisConnection => {
    if (!jobsConnection) {
      jobsConnection = connectRedis(url, { name: `${name}-jobs`, ...topology });
      jobsConnection.on("error", reportError);
    }
    return jobsConnection;
  };
  // Reconnects say why, at most once a minute per reason: ioredis prints every failed attempt otherwise.
  const reported = new Map<string, number>();
  const reportError = (error: NodeJS.ErrnoException) => {
    const reason = error.code ?? error.message;
    if ((reported.get(reason) ?? 0) > Date.now() - 60_000) return;
    reported.set(reason, Date.now());
    logger.warn({ redis: redactedRedisUrl(url), reason }, "Redis connection problem");
  };
  redis.on("error", reportError);
  await untilUsable(redis, config, logger);
  await checkPartitions(redis, prefix, config.redis.partitions);
  const bus = createRedisBusOf({
    redis,
    prefix,
    partitions: config.redis.partitions,
    leaseTtlMs,
    debounceMs: config.agent.debounceMs,
    acceptAfterReplicas: config.redis.acceptAfterReplicas,
    acceptTimeoutMs: config.redis.acceptTimeoutMs,
    now,
    onError: (error) => logger.warn({ err: error }, "outbound delivery problem"),
    // A turn's history goes with its ack: the store's keys of a session share its lease's tag.
    historyKeys: redisHistoryKeys,
  });
  const store = createRedisStore({ redis, prefix, now, partitions: config.redis.partitions, archiveTtlMs: config.agent.archiveRetentionDays * 24 * 60 * 60 * 1000 });
  const budgetLedger = createRedisBudgetLedger({ redis, prefix, onError: (error) => logger.warn({ err: error }, "the usage report's counts could not be written; they are tried again in a second") });
  return {
    kind: "redis",
    get bullmq() {
      return { connection: jobs(), prefix };
    },
    markWorkspace: (workspace) => placeWorkspaceMarker(redis, prefix, workspace),
    checkWorkspace: (workspace) => checkWorkspaceMarkers(redis, prefix, workspace),
    bus,
    store,
    memory: (options) => createRedisMemoryStore({ redis, prefix, scope: options.scope, maxBytes: options.maxBytes, namespace: options.namespace, now }),
    toolHistory: (options = {}) => createRedisToolHistory({ redis, prefix, secrets: options.secrets, now }),
    auditLog: (options) => createRedisAuditLog({ redis, prefix, now, ...options }),
    budgetLedger,
    chatEvents: (channel) => createRedisChatEventLog({ redis, prefix, channel, now }),
    leaseTtlMs,
    queue: (name, events) =>
      createBullmqQueue({
        name,
        connection: jobs(),
        prefix,
        lockDurationMs: config.jobs.lockDurationMs,
        stalledIntervalMs: config.jobs.stalledIntervalMs,
        events,
        logger,
      }),
    scheduler: () => createBullmqScheduler({ connection: jobs(), prefix: `{${prefix}}`, logger }),
    elect: (name) => electLeader({ name, redis, prefix }),
    quotaStore: (channel, account) => createRedisQuotaStore({ redis, prefix, channel, account }),
    counters: redisCounters(redis, prefix),
    ...processRegistry(redis, prefix),
    checks: () => redisChecks(redis),
    close: async () => {
      await bus.close();
      await store.close();
      // The usage report's counts summed since the last flush, before the connection goes.
      await budgetLedger.close();
      await Promise.all([redis.quit().catch(() => undefined), jobsConnection?.quit().catch(() => undefined)]);
    },
  };
}

/**
 * Waits for the connection, then checks the server is fit (its eviction policy, its version): an
 * unreachable one is a ConfigError naming `redis.url`, a doubtful one a warning in the log (or a
 * refusal, as `redis.evictionPolicy` says). A connection that fails either is closed, so the
 * process can exit.
 */
async function untilUsable(redis: RedisConnection, config: ResolvedConfig, logger: Logger): Promise<void> {
  const url = config.redis.url!;
  try {
    await waitUntilReady(redis, config.redis.connectTimeoutMs).catch((error: unknown) => {
      throw new ConfigError(`Redis at ${redactedRedisUrl(url)} cannot be reached: ${errorMessage(error)} (redis.url, REDIS_URL)`, "redis.url");
    });
    const checked = await checkRedis(redis, { evictionPolicy: config.redis.evictionPolicy });
    for (const warning of checked.warnings) logger.warn(`REDIS WARNING: ${warning}`);
  } catch (error) {
    redis.disconnect();
    throw error;
  }
}

/**
 * Every process of a deployment must split the bus into the same partitions: the first to start
 * records its number (`{prefix}:partitions`), and one started with another refuses to, as what is
 * queued or stored under one layout is not found under the other. A deployment from before the
 * record (keys under `{prefix}` alone) counts as 1.
 */
async function checkPartitions(redis: RedisConnection, prefix: string, partitions: number): Promise<void> {
  const key = `${hashTag(prefix)}:partitions`;
  let recorded = await redis.get(key);
  if (recorded === null) {
    const earlier = (await redis.exists(`${hashTag(prefix)}:sessions`, `${hashTag(prefix)}:fence`)) > 0 ? "1" : String(partitions);
    recorded = (await redis.set(key, earlier, "NX", "GET")) ?? earlier;
  }
  if (Number(recorded) !== partitions) {
    redis.disconnect();
    throw new ConfigError(
      `redis.partitions is ${partitions}, but the deployment under prefix "${prefix}" uses ${recorded} (${key}): every process must use the same number; to change it, drain the deployment and delete that key`,
      "redis.partitions",
    );
  }
}

/**
 * Each process's record in the deployment's process table (`countbot status`): announced with a
 * heartbeat, dropped on close, and pruned by readers once its heartbeat is PROCESS_TTL_MS old.
 */
function processRegistry(redis: RedisConnection, prefix: string): Pick<Infrastructure, "announce" | "processes"> {
  return {
    announce(role, details) {
      const key = `{${prefix}}:processes`;
      const record: ProcessRecord = { id: randomUUID(), role, host: hostname(), pid: process.pid, startedAt: Date.now(), seenAt: Date.now() };
      const beat = () => redis.hset(key, record.id, JSON.stringify({ ...record, ...details?.(), seenAt: Date.now() })).catch(() => undefined);
      void beat();
      const timer = setInterval(() => void beat(), ANNOUNCE_EVERY_MS);
      timer.unref();
      return async () => {
        clearInterval(timer);
        await redis.hdel(key, record.id).catch(() => undefined);
      };
    },
    async processes() {
      const key = `{${prefix}}:processes`;
      const now = Date.now();
      const records = Object.values(await redis.hgetall(key)).map((value) => JSON.parse(value) as ProcessRecord);
      const gone = records.filter((record) => now - record.seenAt > PROCESS_TTL_MS);
      if (gone.length > 0) await redis.hdel(key, ...gone.map((record) => record.id));
      return records.filter((record) => now - record.seenAt <= PROCESS_TTL_MS).sort((a, b) => b.startedAt - a.startedAt);
    },
  };
}

/** The shared counters (the heartbeat's daily count): one key each, expiring. */
function redisCounters(redis: RedisConnection, prefix: string): Infrastructure["counters"] {
  const counterKey = (key: string) => `{${prefix}}:${key}`;
  return {
    async increment(key, ttlMs) {
      await redis.multi().incr(counterKey(key)).pexpire(counterKey(key), ttlMs).exec();
    },
    async get(key) {
      return Number((await redis.get(counterKey(key))) ?? 0);
    },
  };
}

/** Readiness: whether Redis answers, said at once while the connection is down. */
async function redisChecks(redis: RedisConnection): ReturnType<Infrastructure["checks"]> {
  // While the connection is down a PING would wait in the offline queue: say "not ready" now.
  if (redis.status !== "ready") return { redis: { ok: false, detail: `Redis connection ${redis.status}` } };
  try {
    return { redis: { ok: (await redis.ping()) === "PONG" } };
  } catch (error) {
    return { redis: { ok: false, detail: errorMessage(error) } };
  }
}

/** Where one process keeps its budget ledger (`countbot usage` reads it there). */
export function ledgerFile(config: ResolvedConfig): string {
  return path.join(config.dataDir, "budgets", "ledger.json");
}

/** Where the embedded deployment's audit file is and how it rotates (`tools.audit`). */
export function fileAuditOptions(config: ResolvedConfig): { directory: string; maxFileBytes: number; maxFiles: number } {
  return { directory: path.join(config.dataDir, "audit"), maxFileBytes: config.tools.audit.maxFileBytes, maxFiles: config.tools.audit.maxFiles };
}
