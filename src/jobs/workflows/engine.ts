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
import { z } from "zod";
import { BudgetExhaustedError, ToolError, errorMessage } from "../../errors.js";
import { sleep } from "../../sleep.js";
import type { WorkflowRunStore } from "../../store/store.js";
import {
  ACTIVE_NODE_STATUSES,
  FINISHED_RUN_STATUSES,
  type NodeState,
  type NodeStatus,
  type RunFilter,
  type RunOrigin,
  SETTLED_NODE_STATUSES,
  type TeamRecord,
  type WorkflowRun,
} from "../../store/team-record.js";
import type { TaskToolCall } from "../../store/task-record.js";
import type { Job, JobFailure, JobQueue, ProcessOptions } from "../job-queue.js";
import { allSettled, describeNode, initialNodes, nextSteps, planNodes, runOutcome } from "./plan.js";
import { type PromptContext, nodePrompt } from "./prompts.js";
import type { RunTeamAgent } from "./team-agent.js";
import { BUDGET_STOP, type WorkflowNotice, type WorkflowNoticeType, runEndMessage } from "./messages.js";
import { inSpan } from "../../tracing.js";

/** The BullMQ queue name of workflow node jobs. */
export const WORKFLOW_QUEUE = "workflows";
/** The job name of one node's run. */
export const WORKFLOW_JOB = "node";

export const WorkflowJobDataSchema = z.object({
  runId: z.string().min(1),
  nodeId: z.string().min(1),
  /** Queued again by `recover`: it may find its node still "running". */
  recovered: z.boolean().optional(),
});
export type WorkflowJobData = z.infer<typeof WorkflowJobDataSchema>;

/** A node's job id: one job per node of a run, so queueing it twice is a no-op. */
export function nodeJobId(runId: string, nodeId: string): string {
  return `${runId}.${nodeId}`;
}

export type { WorkflowNotice, WorkflowNoticeType } from "./messages.js";

export interface WorkflowEngineOptions {
  runs: WorkflowRunStore;
  queue: JobQueue<WorkflowJobData>;
  runAgent: RunTeamAgent;
  /**
   * Posts a `system` message whose chatId is the session key, so the origin chat hears of the
   * result; `replyTo` is the platform message the answer threads to (the run's trigger).
   */
  publishSystem: (sessionKey: string, content: string, id: string, replyTo?: string) => Promise<void>;
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

/** A node run this often (the first run included) whose worker went away is failed, not run again. */
const MAX_NODE_RUNS = 2;
const MAX_TOOL_CALLS = 100;
const CHUNK_INTERVAL_MS = 1_000;
const MAX_CHUNK_CHARS = 4_000;
const UNFINISHED_RUN = ["pending", "running"] as const;
const RUNNING_RUN = ["running"] as const;

export function createWorkflowEngine(options: WorkflowEngineOptions): WorkflowEngine {
  const { runs, queue, logger } = options;
  const now = options.now ?? Date.now;
  const newId = options.newId ?? (() => `wf-${randomUUID()}`);
  const retryDelays = options.publishRetryDelaysMs ?? [1_000, 5_000];
  // A session's starts run one at a time in this process, so two triggers cannot both take its last slot.
  const starting = new Map<string, Promise<unknown>>();
  let closing = false;

  function emit(type: WorkflowNoticeType, run: WorkflowRun, node?: NodeState, toolCall?: TaskToolCall, text?: string): void {
    try {
      options.notify?.({ type, run, node, ...(toolCall ? { toolCall } : {}), ...(text === undefined ? {} : { text }) });
    } catch (error) {
      logger?.warn({ err: error, runId: run.id }, "a workflow notice listener threw");
    }
  }

  const nodeOf = (run: WorkflowRun, nodeId: string) => run.nodes.find((node) => node.id === nodeId);
  const capOf = (team: TeamRecord) => team.maxParallel ?? options.limits.perRun;

  async function announce(run: WorkflowRun): Promise<void> {
    if (!run.sessionKey) return;
    const content = runEndMessage(run);
    for (let attempt = 0; ; attempt++) {
      try {
        // The id makes a repeated announcement (a retry after a lost answer) one message on the bus.
        await options.publishSystem(run.sessionKey, content, `workflow-${run.id}-${run.status}`, run.replyTo);
        return;
      } catch (error) {
        const delay = retryDelays[attempt];
        if (delay === undefined) {
          logger?.error({ err: error, runId: run.id, sessionKey: run.sessionKey }, "could not tell the chat how a team run ended");
          return;
        }
        await sleep(delay);
      }
    }
  }

  /** Settles a node that will not run (skipped, upstream failed, cancelled) or has ended; undefined when another change won. */
  async function settle(run: WorkflowRun, nodeId: string, status: NodeStatus, patch: Partial<NodeState>, from: NodeStatus[]): Promise<WorkflowRun | undefined> {
    const updated = await runs.updateNode(run.id, nodeId, { ...patch, status, completedAt: now() }, { from, runFrom: RUNNING_RUN });
    const node = updated && nodeOf(updated, nodeId);
    if (!updated || !node) return undefined;
    const type: WorkflowNoticeType = status === "completed" ? "node-done" : status === "skipped" ? "node-skipped" : "node-failed";
    logger?.info({ runId: run.id, nodeId, status, error: node.error }, "workflow node settled");
    emit(type, updated, node);
    return updated;
  }

  /**
   * Looks at the run as the latest change left it and does what follows: queue, skip, mark
   * upstream failed, end the run. Repeats while its own changes open more (a skip can unblock a
   * dependent; an upstream failure travels down the graph).
   */
  async function advance(runId: string, snapshot?: WorkflowRun): Promise<void> {
    let run = snapshot ?? (await runs.get(runId));
    for (let rounds = 0; run && run.status === "running" && rounds < 1_000; rounds++) {
      if (allSettled(run)) {
        await finish(run);
        return;
      }
      const steps = nextSteps(run.team, run);
      let changed = false;
      for (const { id, reason } of steps.upstreamFailed) {
        const updated = await settle(run, id, "upstream-failed", { error: reason }, ["pending"]);
        if (updated) [run, changed] = [updated, true];
      }
      for (const { id, reason } of steps.skip) {
        const updated = await settle(run, id, "skipped", { error: reason }, ["pending"]);
        if (updated) [run, changed] = [updated, true];
      }
      for (const id of steps.start) {
        const queued = await runs.updateNode(run.id, id, { status: "queued", queuedAt: now() }, { from: ["pending"], runFrom: RUNNING_RUN, maxActive: capOf(run.team) });
        // At the cap (a finishing node will advance the run again) or started by another worker.
        if (!queued) continue;
        run = queued;
        await enqueue(run.id, id);
      }
      if (!changed) return;
    }
    if (run?.status === "running" && allSettled(run)) await finish(run);
  }

  async function enqueue(runId: string, nodeId: string, recovered = false): Promise<boolean> {
    try {
      return await queue.add(WORKFLOW_JOB, recovered ? { runId, nodeId, recovered } : { runId, nodeId }, { jobId: nodeJobId(runId, nodeId) });
    } catch (error) {
      // The node stays queued; `recover` (at the next worker start) queues it again.
      logger?.error({ err: error, runId, nodeId }, "could not queue a workflow node");
      return false;
    }
  }

  async function finish(run: WorkflowRun): Promise<void> {
    const outcome = runOutcome(run.team, run);
    const ended = await runs.updateRun(
      run.id,
      { status: outcome.status, result: outcome.result, error: outcome.failures.length > 0 ? outcome.failures.join("\n") : undefined, completedAt: now() },
      RUNNING_RUN,
    );
    if (!ended) return; // another worker ended it, or it was cancelled
    logger?.info({ runId: run.id, team: run.teamName, sessionKey: run.sessionKey, status: ended.status, durationMs: (ended.completedAt ?? 0) - run.createdAt }, "workflow run ended");
    emit(ended.status === "completed" ? "run-completed" : "run-failed", ended);
    await announce(ended);
  }

  async function unfinishedCount(sessionKey: string): Promise<number> {
    return (await runs.list({ sessionKey })).filter((run) => !FINISHED_RUN_STATUSES.has(run.status)).length;
  }

  async function createRun(request: StartRequest): Promise<WorkflowRun> {
    const { team, sessionKey } = request;
    const goal = request.goal.trim();
    if (!team.enabled) throw new ToolError(`team "${team.name}" is disabled`, "Enable it (PUT /api/agent-teams/:id with enabled: true) or pick another team.");
    if (goal === "") throw new ToolError(`team "${team.name}" needs a goal`, `Say what the team should do, e.g. @${team.name} <goal>.`);
    const { perSession } = options.limits;
    if (sessionKey && (await unfinishedCount(sessionKey)) >= perSession) {
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
      emit("run-started", run);
      await advance(run.id, run);
      return (await runs.get(run.id)) ?? run;
    });
  }

  /** Runs the node's agent and records how it ended. */
  async function runNode(job: Job<WorkflowJobData>, run: WorkflowRun, node: NodeState): Promise<void> {
    const log = logger?.child({ runId: run.id, nodeId: node.id, jobId: job.id, sessionKey: run.sessionKey });
    const prompt = nodePrompt(run, node.id, { ...options.promptContext(), now: new Date(now()) });
    const started = await runs.updateNode(run.id, node.id, { status: "running", startedAt: now(), attempts: node.attempts + 1, toolCalls: [], input: prompt.input }, { from: ["queued", "running"], runFrom: RUNNING_RUN });
    if (!started) return; // cancelled meanwhile
    const current = nodeOf(started, node.id)!;
    log?.info({ attempt: current.attempts }, "workflow node started");
    emit("node-started", started, current);

    const timeoutMs = run.team.nodeTimeoutSeconds * 1000;
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`timed out after ${run.team.nodeTimeoutSeconds} s`));
    }, timeoutMs);
    const onAbort = () => controller.abort(job.signal.reason);
    job.signal.addEventListener("abort", onAbort, { once: true });
    if (job.signal.aborted) onAbort();

    const toolCalls: TaskToolCall[] = [];
    const onToolCall = async (call: TaskToolCall) => {
      toolCalls.push(call);
      try {
        const updated = await runs.updateNode(run.id, node.id, { toolCalls: toolCalls.slice(-MAX_TOOL_CALLS) }, { from: ["running"] });
        const state = updated && nodeOf(updated, node.id);
        if (updated && state) emit("node-tool", updated, state, call);
      } catch (error) {
        log?.warn({ err: error }, "could not record a tool call");
      }
    };
    const agent = run.team.agents.find((candidate) => candidate.id === node.agentId);
    let outcome: { output: string; model: string; usage?: NodeState["usage"] } | { error: string; budget?: true };
    try {
      // Streamed text, at most once a second per node: lossy by design, the output is kept whole on the run.
      let chunkAt = Number.NEGATIVE_INFINITY;
      const onText = (text: string) => {
        if (now() - chunkAt < CHUNK_INTERVAL_MS) return;
        chunkAt = now();
        emit("node-chunk", started, current, undefined, text.slice(-MAX_CHUNK_CHARS));
      };
      outcome = await options.runAgent({ run: started, node: current, agent, system: prompt.system, input: prompt.input, signal: controller.signal, onToolCall, onText });
    } catch (error) {
      if (timedOut) outcome = { error: `timed out after ${run.team.nodeTimeoutSeconds} s (nodeTimeoutSeconds)` };
      else if (job.signal.aborted) {
        const after = await runs.get(run.id);
        const state = after && nodeOf(after, node.id);
        // cancel() ended it and told the chat already.
        if (!after || after.status !== "running" || !state || SETTLED_NODE_STATUSES.has(state.status)) return;
        // A shutdown: the queue runs the job again elsewhere, which runs the node again.
        throw error;
      } else outcome = error instanceof BudgetExhaustedError ? { error: errorMessage(error), budget: true } : { error: errorMessage(error) };
    } finally {
      clearTimeout(timer);
      job.signal.removeEventListener("abort", onAbort);
    }
    const patch =
      "error" in outcome
        ? { error: outcome.error, toolCalls: toolCalls.slice(-MAX_TOOL_CALLS) }
        : { output: outcome.output, model: outcome.model, toolCalls: toolCalls.slice(-MAX_TOOL_CALLS), ...(outcome.usage ? { usage: outcome.usage } : {}) };
    if ("error" in outcome) log?.warn({ error: outcome.error }, "workflow node failed");
    const settled = await settle(started, node.id, "error" in outcome ? "failed" : "completed", patch, ["running"]);
    if (settled && "budget" in outcome) await stopForBudget(run.id, outcome.error);
    else if (settled) await advance(run.id, settled);
  }

  /**
   * A node was refused for a used-up budget: the run ends "failed" with its error starting "budget
   * exhausted", what its finished agents wrote kept as the result, and its other nodes stopped
   * wherever they run (they would be refused at their next call anyway).
   */
  async function stopForBudget(runId: string, reason: string): Promise<void> {
    const current = await runs.get(runId);
    if (!current || current.status !== "running") return;
    const finished = current.nodes.filter((node) => node.status === "completed");
    const result = finished.map((node) => `## ${describeNode(current.team, node)}\n${node.output ?? ""}`).join("\n\n");
    const error = reason.startsWith(BUDGET_STOP) ? reason : `${BUDGET_STOP}: ${reason}`;
    const stopped = await runs.updateRun(runId, { status: "failed", error, ...(result ? { result } : {}), completedAt: now() }, UNFINISHED_RUN);
    if (!stopped) return;
    logger?.warn({ runId, team: stopped.teamName, sessionKey: stopped.sessionKey, finished: finished.length }, "workflow run stopped: a budget is used up");
    for (const node of stopped.nodes) {
      if (SETTLED_NODE_STATUSES.has(node.status)) continue;
      await runs.updateNode(runId, node.id, { status: "cancelled", completedAt: now(), error: BUDGET_STOP }, { from: ["pending", "queued", "running"] });
      if (ACTIVE_NODE_STATUSES.has(node.status)) {
        await queue.cancel(nodeJobId(runId, node.id)).catch((failure: unknown) => logger?.warn({ err: failure, runId, nodeId: node.id }, "could not cancel a workflow node's job"));
      }
    }
    const after = (await runs.get(runId)) ?? stopped;
    emit("run-failed", after);
    await announce(after);
  }

  const engine: WorkflowEngine = {
    start(request) {
      const previous = starting.get(request.sessionKey) ?? Promise.resolve();
      const created = previous.then(() => createRun(request));
      const settled = created.catch(() => undefined);
      starting.set(request.sessionKey, settled);
      void settled.then(() => {
        if (starting.get(request.sessionKey) === settled) starting.delete(request.sessionKey);
      });
      return created;
    },

    async execute(job) {
      const { runId, nodeId, recovered } = WorkflowJobDataSchema.parse(job.data);
      const run = await runs.get(runId);
      const node = run && nodeOf(run, nodeId);
      if (!run || !node) return; // deleted
      if (run.status !== "running") return; // cancelled or ended: nothing to do
      if (SETTLED_NODE_STATUSES.has(node.status)) {
        // Finished by an earlier run of this job whose worker died before it moved the run on.
        await advance(runId, run);
        return;
      }
      if (node.status === "pending") return; // not queued by the engine: a stray job
      const resumed = node.status === "running" && (job.attempt > 1 || recovered === true);
      if (resumed && node.attempts >= MAX_NODE_RUNS) {
        const times = node.attempts === 2 ? "twice" : `${node.attempts} times`;
        const settled = await settle(run, nodeId, "failed", { error: `its worker died ${times} before it finished` }, ["running"]);
        if (settled) await advance(runId, settled);
        return;
      }
      if (resumed) logger?.warn({ runId, nodeId, jobId: job.id, attempt: node.attempts + 1 }, "running a workflow node again: its worker stopped before it finished");
      await runNode(job, run, node);
    },

    async handleFailed(job, failure) {
      const parsed = WorkflowJobDataSchema.safeParse(job.data);
      if (!parsed.success) return;
      const { runId, nodeId } = parsed.data;
      if (closing && failure.reason === "lost") return;
      const run = await runs.get(runId);
      const node = run && nodeOf(run, nodeId);
      if (!run || !node || run.status !== "running") return;
      if (!ACTIVE_NODE_STATUSES.has(node.status)) {
        // The node ended but its job failed before the run moved on (the store failed mid-advance, say).
        if (SETTLED_NODE_STATUSES.has(node.status)) await advance(runId, run);
        return;
      }
      const error =
        failure.reason === "cancelled"
          ? "its job was cancelled"
          : failure.reason === "lost"
            ? `its worker stopped before it finished and it could not be run again (${failure.message})`
            : failure.message;
      const settled = await settle(run, nodeId, failure.reason === "cancelled" ? "cancelled" : "failed", { error }, ["queued", "running"]);
      if (settled) await advance(runId, settled);
    },

    process(processOptions) {
      return queue.process((job) => engine.execute(job), processOptions);
    },

    async recover() {
      let queued = 0;
      for (const run of await runs.list({ status: "running" })) {
        for (const node of run.nodes) {
          if (ACTIVE_NODE_STATUSES.has(node.status) && (await enqueue(run.id, node.id, true))) {
            logger?.warn({ runId: run.id, nodeId: node.id, status: node.status }, "workflow node queued again: its job was gone");
            queued += 1;
          }
        }
        await advance(run.id, run);
      }
      return queued;
    },

    async cancel(runId) {
      const cancelled = await runs.updateRun(runId, { status: "cancelled", completedAt: now() }, UNFINISHED_RUN);
      if (!cancelled) return runs.get(runId);
      logger?.info({ runId, team: cancelled.teamName, sessionKey: cancelled.sessionKey }, "workflow run cancelled");
      // Before the chat hears of it: the running agents stop now, wherever they run.
      for (const node of cancelled.nodes) {
        if (SETTLED_NODE_STATUSES.has(node.status)) continue;
        await runs.updateNode(runId, node.id, { status: "cancelled", completedAt: now(), error: "the run was cancelled" }, { from: ["pending", "queued", "running"] });
        if (ACTIVE_NODE_STATUSES.has(node.status)) {
          await queue.cancel(nodeJobId(runId, node.id)).catch((error: unknown) => logger?.warn({ err: error, runId, nodeId: node.id }, "could not cancel a workflow node's job"));
        }
      }
      const after = (await runs.get(runId)) ?? cancelled;
      emit("run-cancelled", after);
      await announce(after);
      return after;
    },

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
