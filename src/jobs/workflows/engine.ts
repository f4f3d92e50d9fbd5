/**
 * The workflow engine: runs agent teams with every node (one agent's part) as its own job on the
 * `workflows` queue, so nodes that may run together do, on whichever workers are free.
 *
 * The run and each node's state live in the WorkflowRunStore; every change is a compare-and-set
 * there, which is what makes this safe across workers:
 * - a node is queued by moving it pending → queued under the run's concurrency cap (checked in the
 *   same step), so of two workers that finish the two last dependencies at once only one queues it;
 * - its job moves it queued → running, runs the agent and stores running → completed | failed.
 *   A job whose worker died runs again (the queue's recovery) and finds its node running: it runs
 *   it again. A job that finds its node already settled only advances the run: a finished node
 *   never runs twice, and a crash between "done" and "queue the next ones" loses nothing;
 * - after every change the engine looks at the run as that change left it (`advance`): starts what
 *   may start, skips what a condition rules out, marks what lost a needed node "upstream failed",
 *   and once every node has settled, ends the run and tells the origin chat with a `system`
 *   message (only the compare-and-set that ends the run does).
 * Cancelling a run ends it and aborts its queued and running nodes wherever they run; no other run
 * is touched.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { ToolError } from "../../errors.js";
import type { WorkflowRunStore } from "../../store/store.js";
import { ACTIVE_NODE_STATUSES, FINISHED_RUN_STATUSES, type RunFilter, type RunOrigin, SETTLED_NODE_STATUSES, type TeamRecord, type WorkflowRun } from "../../store/team-record.js";
import type { Job, JobFailure, JobQueue, ProcessOptions } from "../job-queue.js";
import { initialNodes, planNodes } from "./plan.js";
import type { PromptContext } from "./prompts.js";
import type { RunTeamAgent } from "./team-agent.js";
import type { WorkflowNotice } from "./messages.js";
import { type WorkflowJobData, WorkflowJobDataSchema } from "./node-job.js";
import { type NodeRunContext, executeNode } from "./node-run.js";
import { UNFINISHED_RUN, type RunContext, advance, cancelRun, emit, enqueue, nodeOf, settle } from "./run-steps.js";
import { inSpan } from "../../tracing.js";

export { WORKFLOW_JOB, WORKFLOW_QUEUE, WorkflowJobDataSchema, nodeJobId } from "./node-job.js";
export type { WorkflowJobData } from "./node-job.js";

export type { WorkflowNotice, WorkflowNoticeType } from "./messages.js";

export interface WorkflowEngineOptions {
  runs: WorkflowRunStore;
  queue: JobQueue<WorkflowJobData>;
  runAgent: RunTeamAgent;
  /**
   * Posts a `system` message whose chatId is the session key, so the origin chat hears of the
   * result; `replyTo` is the platform message the answer threads to (the run's trigger).
   */
  publishSystem: (sessionKey: string, content: string, id: string, replyTo?: string, profile?: string) => Promise<void>;
  /** Told of every start, node change and end (progress notices); must not throw. */
  notify?: (notice: WorkflowNotice) => void;
  limits: {
    /** Nodes of one run queued or running at once, unless the team sets `maxParallel`. */
    perRun: number;
    /** Unfinished runs one session may have; the next start is refused. */
    perSession: number;
  };
  /** The workspace and tools a node's prompt names. */
  promptContext: () => Omit<PromptContext, "now">;
  now?: () => number;
  /** Run ids; no `:` and not an integer (they are part of job ids). Default: `wf-` + a random UUID. */
  newId?: () => string;
  logger?: Logger;
  /** Waits between attempts to post the end message; injectable for tests. Default 1 s, then 5 s. */
  publishRetryDelaysMs?: number[];
}

export interface StartRequest {
  team: TeamRecord;
  goal: string;
  /** The origin chat's session key; empty when started through the API. */
  sessionKey: string;
  /** `channel:senderId` of the person who started it (their budget counts its calls). */
  person?: string;
  /** The agent profile of the chat that started it (absent: `default`). */
  profile?: string;
  /** A run id derived from what started it (the trigger message), so a retried start finds its run. */
  runId?: string;
  /** What started it, for the operator's list of runs. */
  origin?: RunOrigin;
  /** The platform message that started it, for the status message and the result to thread to. */
  replyTo?: string;
}

export interface WorkflowEngine {
  /** Creates the run and queues its first nodes. ToolError when the team is disabled or the session has too many runs. */
  start(request: StartRequest): Promise<WorkflowRun>;
  /** The queue's job handler: runs one node and advances its run. */
  execute(job: Job<WorkflowJobData>): Promise<void>;
  /** The queue's onFailed: settles the node its job could not (lost, error, cancelled). */
  handleFailed(job: { id: string; data: WorkflowJobData }, failure: JobFailure): Promise<void>;
  /** Starts running node jobs in this process. */
  process(options: ProcessOptions): Promise<void>;
  /** Queues again every queued or running node of unfinished runs whose job the queue does not know, and advances those runs. Returns how many nodes were queued. */
  recover(): Promise<number>;
  /** Cancels a run wherever its nodes run. The run as it is afterwards; undefined when unknown. */
  cancel(runId: string): Promise<WorkflowRun | undefined>;
  /** Cancels every unfinished run the session started (`/stop` in that chat). */
  cancelSession(sessionKey: string): Promise<WorkflowRun[]>;
  get(runId: string): Promise<WorkflowRun | undefined>;
  list(filter?: RunFilter): Promise<WorkflowRun[]>;
  /**
   * Closes the queue. Jobs it drops as it shuts down (the in-process queue reports them lost) keep
   * their nodes queued or running, for `recover` at the next start: a restart costs a run nothing.
   */
  close(graceMs?: number): Promise<void>;
}

/** Runs of one session that have not ended. */
async function unfinishedCount(runs: WorkflowRunStore, sessionKey: string): Promise<number> {
  return (await runs.list({ sessionKey })).filter((run) => !FINISHED_RUN_STATUSES.has(run.status)).length;
}

/**
 * Creates a run (refused, with a ToolError the model reads, for a disabled team, an empty goal or a
 * session at its limit) and queues its first nodes, inside the run's trace span.
 */
async function createRun(context: RunContext, options: Pick<WorkflowEngineOptions, "limits">, newId: () => string, request: StartRequest): Promise<WorkflowRun> {
  const { runs, logger, now } = context;
  const { team, sessionKey } = request;
  const goal = request.goal.trim();
  if (!team.enabled) throw new ToolError(`team "${team.name}" is disabled`, "Enable it (PUT /api/agent-teams/:id with enabled: true) or pick another team.");
  if (goal === "") throw new ToolError(`team "${team.name}" needs a goal`, `Say what the team should do, e.g. @${team.name} <goal>.`);
  const { perSession } = options.limits;
  if (sessionKey && (await unfinishedCount(runs, sessionKey)) >= perSession) {
    throw new ToolError(`this chat already has ${perSession} team run${perSession === 1 ? "" : "s"} going, the most it may have`, "Wait until one of them finishes (you will be told), or /stop them.");
  }
  const createdAt = now();
  const run: WorkflowRun = {
    id: request.runId ?? newId(),
    teamId: team.id,
    teamName: team.name,
    mode: team.mode,
    goal,
    sessionKey,
    ...(request.origin ? { origin: request.origin } : {}),
    ...(request.replyTo ? { replyTo: request.replyTo } : {}),
    ...(request.person ? { person: request.person } : {}),
    // A team that names a profile runs as it; any other as the profile of the chat that started it.
    ...((team.agent ?? request.profile) ? { profile: team.agent ?? request.profile } : {}),
    status: "running",
    team,
    nodes: initialNodes(planNodes(team)),
    createdAt,
    startedAt: createdAt,
  };
  // The run's first nodes are queued inside this span: their jobs (and the later ones) carry its trace.
  const attributes = { "countbot.team": team.name, "countbot.team_run": run.id, "countbot.team_mode": team.mode, "countbot.nodes": run.nodes.length };
  return inSpan(`team_run ${team.name}`, { attributes }, async () => {
    await runs.create(run);
    logger?.info({ runId: run.id, team: team.name, mode: team.mode, sessionKey, nodes: run.nodes.length }, "workflow run started");
    emit(context, "run-started", run);
    await advance(context, run.id, run);
    return (await runs.get(run.id)) ?? run;
  });
}

/** The queue's onFailed: settles the node its job could not (lost, error, cancelled), unless the engine is closing. */
async function nodeJobFailed(context: RunContext, job: { id: string; data: WorkflowJobData }, failure: JobFailure, closing: boolean): Promise<void> {
  const parsed = WorkflowJobDataSchema.safeParse(job.data);
  if (!parsed.success) return;
  const { runId, nodeId } = parsed.data;
  if (closing && failure.reason === "lost") return;
  const run = await context.runs.get(runId);
  const node = run && nodeOf(run, nodeId);
  if (!run || !node || run.status !== "running") return;
  if (!ACTIVE_NODE_STATUSES.has(node.status)) {
    // The node ended but its job failed before the run moved on (the store failed mid-advance, say).
    if (SETTLED_NODE_STATUSES.has(node.status)) await advance(context, runId, run);
    return;
  }
  const error =
    failure.reason === "cancelled"
      ? "its job was cancelled"
      : failure.reason === "lost"
        ? `its worker stopped before it finished and it could not be run again (${failure.message})`
        : failure.message;
  const settled = await settle(context, run, nodeId, failure.reason === "cancelled" ? "cancelled" : "failed", { error }, ["queued", "running"]);
  if (settled) await advance(context, runId, settled);
}

export function createWorkflowEngine(options: WorkflowEngineOptions): WorkflowEngine {
  const { runs, queue, logger } = options;
  const now = options.now ?? Date.now;
  const newId = options.newId ?? (() => `wf-${randomUUID()}`);
  const context: NodeRunContext = {
    runs,
    queue,
    publishSystem: options.publishSystem,
    notify: options.notify,
    perRun: options.limits.perRun,
    logger,
    now,
    retryDelays: options.publishRetryDelaysMs ?? [1_000, 5_000],
    runAgent: options.runAgent,
    promptContext: options.promptContext,
  };
  // A session's starts run one at a time in this process, so two triggers cannot both take its last slot.
  const starting = new Map<string, Promise<unknown>>();
  let closing = false;

  const engine: WorkflowEngine = {
    start(request) {
      const previous = starting.get(request.sessionKey) ?? Promise.resolve();
      const created = previous.then(() => createRun(context, options, newId, request));
      const settled = created.catch(() => undefined);
      starting.set(request.sessionKey, settled);
      void settled.then(() => {
        if (starting.get(request.sessionKey) === settled) starting.delete(request.sessionKey);
      });
      return created;
    },

    execute: (job) => executeNode(context, job),
    handleFailed: (job, failure) => nodeJobFailed(context, job, failure, closing),

    process(processOptions) {
      return queue.process((job) => engine.execute(job), processOptions);
    },

    async recover() {
      let queued = 0;
      for (const run of await runs.list({ status: "running" })) {
        for (const node of run.nodes) {
          if (ACTIVE_NODE_STATUSES.has(node.status) && (await enqueue(context, run.id, node.id, true))) {
            logger?.warn({ runId: run.id, nodeId: node.id, status: node.status }, "workflow node queued again: its job was gone");
            queued += 1;
          }
        }
        await advance(context, run.id, run);
      }
      return queued;
    },

    cancel: (runId) => cancelRun(context, runId),

    async cancelSession(sessionKey) {
      if (!sessionKey) return [];
      const unfinished = (await Promise.all(UNFINISHED_RUN.map((status) => runs.list({ status, sessionKey })))).flat();
      const cancelled: WorkflowRun[] = [];
      for (const run of unfinished) {
        const after = await engine.cancel(run.id);
        if (after?.status === "cancelled") cancelled.push(after);
      }
      return cancelled;
    },

    get: (runId) => runs.get(runId),
    list: (filter) => runs.list(filter),

    async close(graceMs) {
      closing = true;
      await queue.close(graceMs);
    },
  };
  return engine;
}
