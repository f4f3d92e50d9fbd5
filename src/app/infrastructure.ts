/**
 * The one place that decides "memory or Redis": everything shared between processes (bus, store,
 * job queues, the scheduler, leader election, counters) comes from here, built once per process.
 * No other module chooses.
 */
import { mkdir } from "node:fs/promises";
import path from "node:path";
import type { RedisConnection } from "../redis/client.js";
import type { Logger } from "pino";
import { type ElectLeader, electLeader, soleLeader } from "../bus/leader.js";
import { createMemoryBus } from "../bus/memory-bus.js";
import type { MessageBus } from "../bus/message-bus.js";
import { createRedisBus } from "../bus/redis-bus.js";
import type { ResolvedConfig } from "../config/schema.js";
import { ConfigError, errorMessage } from "../errors.js";
import type { ReadinessCheck } from "../api/server.js";
import { createBullmqQueue } from "../jobs/bullmq-queue.js";
import { createBullmqScheduler } from "../jobs/cron/bullmq-scheduler.js";
import { createInProcessScheduler } from "../jobs/cron/in-process-scheduler.js";
import type { Scheduler } from "../jobs/cron/scheduler.js";
import { createInProcessQueue } from "../jobs/in-process-queue.js";
import type { JobQueue, JobQueueEvents } from "../jobs/job-queue.js";
import { checkRedis } from "../redis/checks.js";
import { connectRedis, redactedRedisUrl, waitUntilReady } from "../redis/client.js";
import { createFileStore } from "../store/file-store.js";
import { createRedisStore } from "../store/redis-store.js";
import type { Store } from "../store/store.js";

/** Counts shared by every process of the deployment (the heartbeat's daily cap). */
export interface Counters {
  increment(key: string, ttlMs: number): Promise<void>;
  get(key: string): Promise<number>;
}

/** Builds a job queue; the composition root wires its consumers. */
export type QueueFactory = <Data>(name: string, events?: JobQueueEvents<Data>) => JobQueue<Data>;

export interface Infrastructure {
  /** `memory`: one process (in-memory bus, file store); `redis`: gateways and workers share Redis. */
  kind: "memory" | "redis";
  bus: MessageBus;
  store: Store;
  leaseTtlMs: number;
  queue: QueueFactory;
  /** Scheduled messages: BullMQ job schedulers, or a file-backed scheduler in this process. */
  scheduler(): Scheduler;
  /** Leader election: one process at a time leads a name (always this one in memory). */
  elect: ElectLeader;
  counters: Counters;
  /** Readiness of what is shared (Redis answers PING). */
  checks(): Promise<Record<string, ReadinessCheck>>;
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
  return createRedisInfrastructure(config, logger, options.now);
}

async function createMemoryInfrastructure(config: ResolvedConfig, logger: Logger, now: (() => number) | undefined): Promise<Infrastructure> {
  const leaseTtlMs = config.redis.leaseTtlMs;
  await mkdir(config.dataDir, { recursive: true });
  const bus = createMemoryBus({ debounceMs: config.agent.debounceMs, leaseTtlMs, now });
  const store = createFileStore({
    dataDir: config.dataDir,
    now,
    // Fenced writes are checked against the bus's lease, which reads only a claim's session key and token.
    holdsLease: (sessionKey, fence) => bus.holds({ sessionKey, token: fence.token, messages: [], attempt: 0 }),
  });
  const clock = now ?? Date.now;
  const counts = new Map<string, { value: number; expiresAt: number }>();
  return {
    kind: "memory",
    bus,
    store,
    leaseTtlMs,
    queue: (name, events) => createInProcessQueue({ name, events, logger, now }),
    scheduler: () => createInProcessScheduler({ file: path.join(config.dataDir, "cron", "jobs.json"), now, logger }),
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
    close: async () => void (await Promise.all([bus.close(), store.close()])),
  };
}

async function createRedisInfrastructure(config: ResolvedConfig, logger: Logger, now: (() => number) | undefined): Promise<Infrastructure> {
  const { prefix, leaseTtlMs } = config.redis;
  const url = config.redis.url!;
  const redis: RedisConnection = connectRedis(url, { name: "countbot" });
  // Reconnects say why, at most once a minute per reason: ioredis prints every failed attempt otherwise.
  const reported = new Map<string, number>();
  redis.on("error", (error: NodeJS.ErrnoException) => {
    const reason = error.code ?? error.message;
    if ((reported.get(reason) ?? 0) > Date.now() - 60_000) return;
    reported.set(reason, Date.now());
    logger.warn({ redis: redactedRedisUrl(url), reason }, "Redis connection problem");
  });
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
  const bus = createRedisBus({
    redis,
    prefix,
    leaseTtlMs,
    debounceMs: config.agent.debounceMs,
    now,
    onError: (error) => logger.warn({ err: error }, "outbound delivery problem"),
  });
  const store = createRedisStore({ redis, prefix, now });
  const counterKey = (key: string) => `{${prefix}}:${key}`;
  return {
    kind: "redis",
    bus,
    store,
    leaseTtlMs,
    queue: (name, events) =>
      createBullmqQueue({
        name,
        connection: redis,
        prefix,
        lockDurationMs: config.jobs.lockDurationMs,
        stalledIntervalMs: config.jobs.stalledIntervalMs,
        events,
        logger,
      }),
    scheduler: () => createBullmqScheduler({ connection: redis, prefix: `{${prefix}}`, logger }),
    elect: (name) => electLeader({ name, redis, prefix }),
    counters: {
      async increment(key, ttlMs) {
        await redis.multi().incr(counterKey(key)).pexpire(counterKey(key), ttlMs).exec();
      },
      async get(key) {
        return Number((await redis.get(counterKey(key))) ?? 0);
      },
    },
    async checks() {
      // While the connection is down a PING would wait in the offline queue: say "not ready" now.
      if (redis.status !== "ready") return { redis: { ok: false, detail: `Redis connection ${redis.status}` } };
      try {
        return { redis: { ok: (await redis.ping()) === "PONG" } };
      } catch (error) {
        return { redis: { ok: false, detail: errorMessage(error) } };
      }
    },
    close: async () => {
      await bus.close();
      await store.close();
      await redis.quit().catch(() => undefined);
    },
  };
}
