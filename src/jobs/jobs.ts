/**
 * Background work of one deployment: subagents, scheduled messages and the heartbeat, on the queue,
 * scheduler, leader election and counter the composition root hands in (in-process or BullMQ and
 * Redis: decided there, not here). Every process can create, list and cancel; only workers (and
 * `start`) run jobs.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { ElectLeader, Leadership } from "../bus/leader.js";
import { SYSTEM_CHANNEL, type InboundMessage } from "../bus/message.js";
import type { MessageBus } from "../bus/message-bus.js";
import type { ResolvedConfig } from "../config/schema.js";
import type { Store } from "../store/store.js";
import type { Scheduler } from "./cron/scheduler.js";
import { type DeliveryCounter, type Heartbeat, createHeartbeat, isHeartbeatPrompt, isSilentHeartbeatReply } from "./heartbeat.js";
import { type RunSubagentTask, SUBAGENT_QUEUE, type SubagentJobData, type SubagentManager, createSubagentManager } from "./subagents/manager.js";
import type { JobQueue, JobQueueEvents } from "./job-queue.js";

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
  /** Builds the subagents' queue. */
  queue: <Data>(name: string, events?: JobQueueEvents<Data>) => JobQueue<Data>;
  scheduler: Scheduler;
  /** One heartbeat per deployment, however many workers run. */
  elect: ElectLeader;
  /** The heartbeat's daily count, shared by every worker. */
  heartbeatCounter?: DeliveryCounter;
  workspace: string;
  /** Runs a subagent's loop; absent in processes that never run jobs (the gateway). */
  runTask?: RunSubagentTask;
  now?: () => number;
}

export function createJobs(options: JobsOptions): Jobs {
  const { config, logger, bus, store } = options;
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
  const queue = options.queue<SubagentJobData>(SUBAGENT_QUEUE, events);
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

  const { scheduler } = options;

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
          counter: options.heartbeatCounter,
        })
      : undefined;
  if (heartbeatConfig.enabled && !heartbeatConfig.target) logger.warn("heartbeat.enabled is set but heartbeat.target is not: no heartbeat");

  let heartbeatLeadership: Leadership | undefined;
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
        heartbeatLeadership = options.elect("heartbeat");
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
