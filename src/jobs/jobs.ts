/**
 * Background work of one deployment: subagents, agent-team runs, scheduled messages and the heartbeat, on the queues,
 * scheduler, leader election and counter the composition root hands in (in-process or BullMQ and
 * Redis: decided there, not here). Every process can create, list and cancel; only workers (and
 * `start`) run jobs.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { ElectLeader, Leadership } from "../bus/leader.js";
import { SYSTEM_CHANNEL, type InboundMessage } from "../bus/message.js";
import type { GatewayBus, WorkerBus } from "../bus/message-bus.js";
import type { ResolvedConfig } from "../config/schema.js";
import type { Store } from "../store/store.js";
import type { Scheduler } from "./cron/scheduler.js";
import { type DeliveryCounter, type Heartbeat, createHeartbeat, isHeartbeatPrompt, isSilentHeartbeatReply } from "./heartbeat.js";
import { type RunSubagentTask, SUBAGENT_QUEUE, type SubagentJobData, type SubagentManager, createSubagentManager } from "./subagents/manager.js";
import type { JobCounts, JobQueue, JobQueueEvents } from "./job-queue.js";
import type { TurnIntercept } from "../bus/turn-intercept.js";
import type { Subscription } from "../bus/message-bus.js";
import { WORKFLOW_QUEUE, type WorkflowEngine, type WorkflowJobData, createWorkflowEngine } from "./workflows/engine.js";
import { progressNotice } from "./workflows/progress.js";
import type { RunTeamAgent } from "./workflows/team-agent.js";
import { type TeamCatalog, createTeamCatalog } from "./workflows/team-catalog.js";
import { createTeamTrigger } from "./workflows/triggers.js";

const DAY_MS = 24 * 60 * 60 * 1000;

export interface Jobs {
  subagents: SubagentManager;
  /** Agent-team runs: every agent a job on the `workflows` queue. */
  workflows: WorkflowEngine;
  /** The teams of the config file and of the store. */
  teams: TeamCatalog;
  /** `@TeamName goal` and `/team name goal` in a chat: the TurnConsumer's intercept. */
  intercept: TurnIntercept;
  scheduler: Scheduler;
  heartbeat?: Heartbeat;
  /** Drops a silent heartbeat reply (HEARTBEAT_OK) and counts a delivered one toward the daily cap. */
  replyFilter(messages: InboundMessage[], reply: string): boolean;
  /**
   * Deletes what finished long enough ago: subagent tasks after a day, team runs after
   * `workflows.keepRunsDays` (never when 0). Runs hourly once `start`ed; returns how many went.
   */
  cleanup(): Promise<{ tasks: number; runs: number }>;
  /** Jobs waiting and running per queue (`subagents`, `workflows`), for metrics. */
  queueCounts(): Promise<Array<{ queue: string } & JobCounts>>;
  /** Run jobs in this process: subagents, scheduled firings, the heartbeat (workers and `start`). */
  start(): Promise<void>;
  close(): Promise<void>;
}

export interface JobsOptions {
  config: ResolvedConfig;
  logger: Logger;
  /** Background completions are published as inbound `system` messages, notices as outbound; workers hear cancellations. */
  bus: Pick<GatewayBus, "publishInbound"> & Pick<WorkerBus, "onCancel" | "publishOutbound">;
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
  /** Runs one agent of a team; absent in processes that never run jobs (the gateway). */
  runTeamAgent?: RunTeamAgent;
  /** The tools team agents have, for their prompt (asked each time: MCP servers' tools join at run time). */
  teamToolNames?: () => string[];
  /** The agent profile a message's chat is routed to: a team it triggers runs as that profile. */
  profileOf?: (message: InboundMessage) => string;
  /** The teams a message's chat may start (its profile's `teams`); undefined: every team. */
  teamsOf?: (message: InboundMessage) => readonly string[] | undefined;
  now?: () => number;
}

export function createJobs(options: JobsOptions): Jobs {
  const { config, logger, bus, store } = options;
  const now = options.now ?? Date.now;
  const publishSystem = systemPublisher(bus, now);
  const { manager, queue } = createSubagents(options, publishSystem, now);
  const teams = createTeamCatalog({ store: store.teams, teams: config.teams, now });
  const { workflows, workflowQueue } = createWorkflows(options, publishSystem, now);
  const intercept = createTeamTrigger({ catalog: teams, engine: workflows, sessions: store.sessions, now, logger, ...(options.profileOf ? { profileOf: options.profileOf } : {}), ...(options.teamsOf ? { teamsOf: options.teamsOf } : {}) });
  let cancelSubscription: Subscription | undefined;
  const { scheduler } = options;
  const heartbeat = configuredHeartbeat(options, publishSystem, now);
  let heartbeatLeadership: Leadership | undefined;
  let cleanupTimer: NodeJS.Timeout | undefined;
  const keepRunsMs = config.workflows.keepRunsDays * DAY_MS;
  const jobs: Jobs = {
    async cleanup() {
      const tasks = await manager.cleanup();
      const runs = keepRunsMs > 0 ? await store.runs.cleanup(now() - keepRunsMs) : 0;
      if (tasks + runs > 0) logger.info({ tasks, runs }, "deleted finished subagent tasks and team runs");
      return { tasks, runs };
    },
    async queueCounts() {
      return Promise.all([
        queue.counts().then((counts) => ({ queue: SUBAGENT_QUEUE, ...counts })),
        workflowQueue.counts().then((counts) => ({ queue: WORKFLOW_QUEUE, ...counts })),
      ]);
    },
    subagents: manager,
    workflows,
    teams,
    intercept,
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
      await workflows.process({ concurrency: config.workflows.concurrency, globalConcurrency: config.workflows.globalConcurrency });
      const recoveredNodes = await workflows.recover();
      if (recoveredNodes > 0) logger.warn({ recovered: recoveredNodes }, "re-queued workflow nodes left unfinished by a crash or a restart");
      // `/stop` in a chat reaches every worker: each cancels that chat's runs (the first one wins).
      cancelSubscription = await bus.onCancel((sessionKey) => {
        void workflows.cancelSession(sessionKey).catch((error: unknown) => logger.warn({ err: error, sessionKey }, "could not cancel the chat's team runs"));
      });
      await scheduler.start(async (job, firedAt) => {
        await publishSystem(job.sessionKey, `Scheduled (${job.id}) for ${new Date(firedAt).toISOString()}: ${job.message}`, `${job.id}-${firedAt}`);
      });
      if (heartbeat) {
        // One heartbeat per deployment, however many workers run.
        heartbeatLeadership = options.elect("heartbeat");
        void heartbeatLeadership.acquired.then((leading) => (leading ? heartbeat.start() : undefined));
      }
      cleanupTimer = setInterval(() => void jobs.cleanup().catch((error: unknown) => logger.warn({ err: error }, "could not clean up finished tasks and team runs")), 60 * 60 * 1000);
      cleanupTimer.unref();
    },
    async close() {
      if (cleanupTimer) clearInterval(cleanupTimer);
      heartbeat?.stop();
      await heartbeatLeadership?.resign();
      await cancelSubscription?.close();
      await Promise.all([queue.close(config.shutdownGraceMs), workflows.close(config.shutdownGraceMs)]);
      await scheduler.close();
    },
  };
  return jobs;
}

/** Publishes an inbound `system` message (a background result, a firing) for the agent to answer. */
/** `profile`: the agent profile of the job the event is about, so the same profile answers it. */
type PublishSystem = (sessionKey: string, content: string, id?: string, replyTo?: string, profile?: string) => Promise<void>;

/** `replyTo`: the platform message the answer threads to (a team run's trigger). */
function systemPublisher(bus: JobsOptions["bus"], now: () => number): PublishSystem {
  return async (sessionKey, content, id = `system-${randomUUID()}`, replyTo, profile) => {
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
      metadata: { ...(replyTo ? { platformMessageId: replyTo } : {}), ...(profile ? { profile } : {}) },
    });
  };
}

/**
 * The subagents' queue and manager. A task's notices reach its origin chat as `notice` messages:
 * the web page shows them, chat platforms do not by default.
 */
function createSubagents(options: JobsOptions, publishSystem: PublishSystem, now: () => number): { manager: SubagentManager; queue: JobQueue<SubagentJobData> } {
  const { config, logger, bus, store } = options;
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
    publishSystem: (sessionKey, content, profile) => publishSystem(sessionKey, content, undefined, undefined, profile),
    notify: (notice) => {
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
  return { manager, queue };
}

/**
 * The team runs' queue and engine. Progress reaches the origin chat as `notice` messages: the web
 * page lists them, chat platforms keep one status message per run (or show nothing). The result
 * comes as a `system` message the agent answers.
 */
function createWorkflows(options: JobsOptions, publishSystem: PublishSystem, now: () => number): { workflows: WorkflowEngine; workflowQueue: JobQueue<WorkflowJobData> } {
  const { config, logger, bus, store } = options;
  const workflowEvents = { onFailed: (job: { id: string; name: string; data: WorkflowJobData }, failure: Parameters<WorkflowEngine["handleFailed"]>[1]) => workflows.handleFailed(job, failure) };
  const workflowQueue = options.queue<WorkflowJobData>(WORKFLOW_QUEUE, workflowEvents);
  const workflows: WorkflowEngine = createWorkflowEngine({
    runs: store.runs,
    queue: workflowQueue,
    runAgent:
      options.runTeamAgent ??
      (async () => {
        throw new Error("this process does not run team agents");
      }),
    publishSystem: (sessionKey, content, id, replyTo, profile) => publishSystem(sessionKey, content, id, replyTo, profile),
    notify: (notice) => {
      const message = progressNotice(notice);
      if (!message) return;
      void bus.publishOutbound(message).catch((error: unknown) => logger.warn({ err: error, runId: notice.run.id }, "workflow notice failed"));
    },
    limits: { perRun: config.workflows.perRunConcurrency, perSession: config.workflows.perSession },
    promptContext: () => ({ workspace: options.workspace, toolNames: options.teamToolNames?.() ?? [] }),
    logger,
    now,
  });
  return { workflows, workflowQueue };
}

/** The heartbeat `heartbeat` configures, when it is enabled and has a target (a warning when it has none). */
function configuredHeartbeat(options: JobsOptions, publishSystem: PublishSystem, now: () => number): Heartbeat | undefined {
  const { logger } = options;
  const heartbeatConfig = options.config.heartbeat;
  if (heartbeatConfig.enabled && !heartbeatConfig.target) logger.warn("heartbeat.enabled is set but heartbeat.target is not: no heartbeat");
  if (!heartbeatConfig.enabled || !heartbeatConfig.target) return undefined;
  return createHeartbeat({
    intervalMinutes: heartbeatConfig.intervalMinutes,
    quietHours: heartbeatConfig.quietHours,
    dailyCap: heartbeatConfig.dailyCap,
    targetSessionKey: heartbeatConfig.target,
    workspace: options.workspace,
    publishSystem: (sessionKey, content) => publishSystem(sessionKey, content),
    now,
    logger,
    counter: options.heartbeatCounter,
  });
}
