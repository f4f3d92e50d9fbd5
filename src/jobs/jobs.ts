/**
 * Background work of one deployment, built for the runtime it runs on: subagents (BullMQ or
 * in-process queue), scheduled messages (BullMQ job schedulers or the in-process scheduler) and
 * the heartbeat. Every process can create, list and cancel; only workers (and `start`) run jobs.
 */
import { randomUUID } from "node:crypto";
import path from "node:path";
import type { BullmqConnection, RedisClient } from "../redis/client.js";
import type { Logger } from "pino";
import { electLeader } from "../bus/leader.js";
import { SYSTEM_CHANNEL, type InboundMessage } from "../bus/message.js";
import type { MessageBus } from "../bus/message-bus.js";
import type { ResolvedConfig } from "../config/schema.js";
import type { Store } from "../store/store.js";
import { createBullmqQueue } from "./bullmq-queue.js";
import { createBullmqScheduler } from "./cron/bullmq-scheduler.js";
import { createInProcessScheduler } from "./cron/in-process-scheduler.js";
import type { Scheduler } from "./cron/scheduler.js";
import { type DeliveryCounter, type Heartbeat, createHeartbeat, isHeartbeatPrompt, isSilentHeartbeatReply } from "./heartbeat.js";
import { createInProcessQueue } from "./in-process-queue.js";
import { type RunSubagentTask, SUBAGENT_QUEUE, type SubagentJobData, type SubagentManager, createSubagentManager } from "./subagents/manager.js";
import type { JobQueue } from "./job-queue.js";

export interface Jobs {
  subagents: SubagentManager;
  scheduler: Scheduler;
  heartbeat?: Heartbeat;
  /** Drops a silent heartbeat reply (HEARTBEAT_OK) and counts a delivered one toward the daily cap. */
  replyFilter(messages: InboundMessage[], reply: string): boolean;
  /** Run jobs in this process: subagents, scheduled firings, the heartbeat (workers and `start`). */
  start(): Promise<void>;
  close(): Promise<void>;
}

export interface JobsOptions {
  config: ResolvedConfig;
  logger: Logger;
  bus: MessageBus;
  store: Store;
  /** Handed to BullMQ (queues, cron), so ioredis itself; see BullmqConnection. */
  redis?: BullmqConnection;
  workspace: string;
  /** Runs a subagent's loop; absent in processes that never run jobs (the gateway). */
  runTask?: RunSubagentTask;
  now?: () => number;
}

/** The heartbeat's daily count in Redis, so every worker's deliveries count toward one cap. */
function redisDeliveryCounter(redis: RedisClient, prefix: string): DeliveryCounter {
  const key = (day: string) => `{${prefix}}:heartbeat:delivered:${day}`;
  return {
    async increment(day) {
      await redis.multi().incr(key(day)).pexpire(key(day), 3 * 24 * 60 * 60 * 1000).exec();
    },
    async get(day) {
      return Number((await redis.get(key(day))) ?? 0);
    },
  };
}

export function createJobs(options: JobsOptions): Jobs {
  const { config, logger, bus, store, redis } = options;
  const now = options.now ?? Date.now;
  const publishSystem = async (sessionKey: string, content: string, id = `system-${randomUUID()}`): Promise<void> => {
    await bus.publishInbound({
      id,
      channel: SYSTEM_CHANNEL,
      chatId: sessionKey,
      senderId: "countbot",
      content,
      media: [],
      mentions: [],
      receivedAt: now(),
      platformEventId: id,
      metadata: {},
    });
  };

  // The queue reports failures to the manager, which needs the queue: the callback reads `manager` only when called.
  const events = { onFailed: (job: { id: string; name: string; data: SubagentJobData }, failure: Parameters<SubagentManager["handleFailed"]>[1]) => manager.handleFailed(job, failure) };
  const queue: JobQueue<SubagentJobData> = redis
    ? createBullmqQueue<SubagentJobData>({
        name: SUBAGENT_QUEUE,
        connection: redis,
        prefix: config.redis.prefix,
        lockDurationMs: config.jobs.lockDurationMs,
        stalledIntervalMs: config.jobs.stalledIntervalMs,
        events,
        logger,
      })
    : createInProcessQueue<SubagentJobData>({ name: SUBAGENT_QUEUE, events, logger });
  const manager: SubagentManager = createSubagentManager({
    store: store.tasks,
    queue,
    runTask:
      options.runTask ??
      (async () => {
        throw new Error("this process does not run subagents");
      }),
    publishSystem: (sessionKey, content) => publishSystem(sessionKey, content),
    notify: (notice) => {
      // Task notices reach the origin chat as `notice` messages: the web page shows them, chat
      // platforms do not by default.
      const separator = notice.task.sessionKey.indexOf(":");
      if (separator <= 0) return;
      const progress = notice.type === "progress" ? ` ${notice.task.progress}%` : "";
      void bus
        .publishOutbound({
          id: `task-${notice.task.id}-${notice.type}-${notice.task.progress}`,
          channel: notice.task.sessionKey.slice(0, separator),
          chatId: notice.task.sessionKey.slice(separator + 1),
          content: `Subagent [${notice.task.label}] ${notice.type}${progress}`,
          kind: "notice",
          media: [],
          metadata: { task: { id: notice.task.id, event: notice.type, status: notice.task.status, progress: notice.task.progress } },
        })
        .catch((error: unknown) => logger.warn({ err: error, task: notice.task.id }, "task notice failed"));
    },
    limits: { perSession: config.jobs.subagentsPerSession },
    logger,
    now,
  });

  const scheduler = redis
    ? createBullmqScheduler({ connection: redis, prefix: `{${config.redis.prefix}}`, logger })
    : createInProcessScheduler({ file: path.join(config.dataDir, "cron", "jobs.json"), now, logger });

  const heartbeatConfig = config.heartbeat;
  const heartbeat =
    heartbeatConfig.enabled && heartbeatConfig.target
      ? createHeartbeat({
          intervalMinutes: heartbeatConfig.intervalMinutes,
          quietHours: heartbeatConfig.quietHours,
          dailyCap: heartbeatConfig.dailyCap,
          targetSessionKey: heartbeatConfig.target,
          workspace: options.workspace,
          publishSystem: (sessionKey, content) => publishSystem(sessionKey, content),
          now,
          logger,
          counter: redis ? redisDeliveryCounter(redis, config.redis.prefix) : undefined,
        })
      : undefined;
  if (heartbeatConfig.enabled && !heartbeatConfig.target) logger.warn("heartbeat.enabled is set but heartbeat.target is not: no heartbeat");

  let heartbeatLeadership: ReturnType<typeof electLeader> | undefined;
  let cleanupTimer: NodeJS.Timeout | undefined;
  return {
    subagents: manager,
    scheduler,
    heartbeat,
    replyFilter(messages, reply) {
      if (!messages.every((message) => message.channel === SYSTEM_CHANNEL && isHeartbeatPrompt(message.content))) return true;
      if (isSilentHeartbeatReply(reply)) return false;
      heartbeat?.recordDelivered();
      return true;
    },
    async start() {
      await manager.start({ concurrency: 8 });
      const recovered = await manager.recover();
      if (recovered > 0) logger.warn({ recovered }, "re-queued subagent tasks left unfinished by a crash");
      await scheduler.start(async (job, firedAt) => {
        await publishSystem(job.sessionKey, `Scheduled (${job.id}) for ${new Date(firedAt).toISOString()}: ${job.message}`, `${job.id}-${firedAt}`);
      });
      if (heartbeat) {
        // One heartbeat per deployment, however many workers run.
        heartbeatLeadership = electLeader({ name: "heartbeat", redis, prefix: config.redis.prefix });
        void heartbeatLeadership.acquired.then((leading) => (leading ? heartbeat.start() : undefined));
      }
      cleanupTimer = setInterval(() => void manager.cleanup().catch(() => undefined), 60 * 60 * 1000);
      cleanupTimer.unref();
    },
    async close() {
      if (cleanupTimer) clearInterval(cleanupTimer);
      heartbeat?.stop();
      await heartbeatLeadership?.resign();
      await queue.close(config.shutdownGraceMs);
      await scheduler.close();
    },
  };
}
