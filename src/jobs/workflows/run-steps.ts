/**
 * The steps a team run moves by, each a compare-and-set in the WorkflowRunStore (see ./engine.ts
 * for why that makes them safe across workers): settle a node, look at the run and do what follows
 * (`advance`), end it, stop it for a used-up budget, cancel it. Only the change that wins tells the
 * listeners and the origin chat.
 */
import type { Logger } from "pino";
import { sleep } from "../../sleep.js";
import type { WorkflowRunStore } from "../../store/store.js";
import { ACTIVE_NODE_STATUSES, type NodeState, type NodeStatus, SETTLED_NODE_STATUSES, type WorkflowRun } from "../../store/team-record.js";
import type { TaskToolCall } from "../../store/task-record.js";
import type { JobQueue } from "../job-queue.js";
import { BUDGET_STOP, type WorkflowNotice, type WorkflowNoticeType, runEndMessage } from "./messages.js";
import { WORKFLOW_JOB, type WorkflowJobData, nodeJobId } from "./node-job.js";
import { allSettled, describeNode, nextSteps, runOutcome } from "./plan.js";

/** What the steps of every run share: the engine's store, queue, listeners, clock and log. */
export interface RunContext {
  runs: WorkflowRunStore;
  queue: JobQueue<WorkflowJobData>;
  /** Posts a `system` message to the origin chat (see WorkflowEngineOptions.publishSystem). */
  publishSystem: (sessionKey: string, content: string, id: string, replyTo?: string, profile?: string) => Promise<void>;
  notify?: (notice: WorkflowNotice) => void;
  /** Nodes of one run queued or running at once, unless the team sets `maxParallel`. */
  perRun: number;
  logger?: Logger;
  now: () => number;
  /** Waits between attempts to post the end message. */
  retryDelays: number[];
}

export const UNFINISHED_RUN = ["pending", "running"] as const;
export const RUNNING_RUN = ["running"] as const;

export const nodeOf = (run: WorkflowRun, nodeId: string) => run.nodes.find((node) => node.id === nodeId);

/** Tells the listener (progress notices); one that throws is logged, not fatal. */
export function emit(context: RunContext, type: WorkflowNoticeType, run: WorkflowRun, node?: NodeState, toolCall?: TaskToolCall, text?: string): void {
  try {
    context.notify?.({ type, run, node, ...(toolCall ? { toolCall } : {}), ...(text === undefined ? {} : { text }) });
  } catch (error) {
    context.logger?.warn({ err: error, runId: run.id }, "a workflow notice listener threw");
  }
}

/** Tells the origin chat how the run ended, with retries. */
async function announce(context: RunContext, run: WorkflowRun): Promise<void> {
  if (!run.sessionKey) return;
  const content = runEndMessage(run);
  for (let attempt = 0; ; attempt++) {
    try {
      // The id makes a repeated announcement (a retry after a lost answer) one message on the bus.
      await context.publishSystem(run.sessionKey, content, `workflow-${run.id}-${run.status}`, run.replyTo, run.profile);
      return;
    } catch (error) {
      const delay = context.retryDelays[attempt];
      if (delay === undefined) {
        context.logger?.error({ err: error, runId: run.id, sessionKey: run.sessionKey }, "could not tell the chat how a team run ended");
        return;
      }
      await sleep(delay);
    }
  }
}

/** Settles a node that will not run (skipped, upstream failed, cancelled) or has ended; undefined when another change won. */
export async function settle(context: RunContext, run: WorkflowRun, nodeId: string, status: NodeStatus, patch: Partial<NodeState>, from: NodeStatus[]): Promise<WorkflowRun | undefined> {
  const updated = await context.runs.updateNode(run.id, nodeId, { ...patch, status, completedAt: context.now() }, { from, runFrom: RUNNING_RUN });
  const node = updated && nodeOf(updated, nodeId);
  if (!updated || !node) return undefined;
  const type: WorkflowNoticeType = status === "completed" ? "node-done" : status === "skipped" ? "node-skipped" : "node-failed";
  context.logger?.info({ runId: run.id, nodeId, status, error: node.error }, "workflow node settled");
  emit(context, type, updated, node);
  return updated;
}

/**
 * Looks at the run as the latest change left it and does what follows: queue, skip, mark
 * upstream failed, end the run. Repeats while its own changes open more (a skip can unblock a
 * dependent; an upstream failure travels down the graph).
 */
export async function advance(context: RunContext, runId: string, snapshot?: WorkflowRun): Promise<void> {
  const { runs, now } = context;
  let run = snapshot ?? (await runs.get(runId));
  for (let rounds = 0; run && run.status === "running" && rounds < 1_000; rounds++) {
    if (allSettled(run)) {
      await finish(context, run);
      return;
    }
    const steps = nextSteps(run.team, run);
    let changed = false;
    for (const { id, reason } of steps.upstreamFailed) {
      const updated = await settle(context, run, id, "upstream-failed", { error: reason }, ["pending"]);
      if (updated) [run, changed] = [updated, true];
    }
    for (const { id, reason } of steps.skip) {
      const updated = await settle(context, run, id, "skipped", { error: reason }, ["pending"]);
      if (updated) [run, changed] = [updated, true];
    }
    for (const id of steps.start) {
      const maxActive = run.team.maxParallel ?? context.perRun;
      const queued = await runs.updateNode(run.id, id, { status: "queued", queuedAt: now() }, { from: ["pending"], runFrom: RUNNING_RUN, maxActive });
      // At the cap (a finishing node will advance the run again) or started by another worker.
      if (!queued) continue;
      run = queued;
      await enqueue(context, run.id, id);
    }
    if (!changed) return;
  }
  if (run?.status === "running" && allSettled(run)) await finish(context, run);
}

/** Queues a node's job; false when the queue has it already or refused it. */
export async function enqueue(context: RunContext, runId: string, nodeId: string, recovered = false): Promise<boolean> {
  try {
    return await context.queue.add(WORKFLOW_JOB, recovered ? { runId, nodeId, recovered } : { runId, nodeId }, { jobId: nodeJobId(runId, nodeId) });
  } catch (error) {
    // The node stays queued; `recover` (at the next worker start) queues it again.
    context.logger?.error({ err: error, runId, nodeId }, "could not queue a workflow node");
    return false;
  }
}

/** Ends a run whose nodes have all settled, with the outcome its mode makes of them. */
async function finish(context: RunContext, run: WorkflowRun): Promise<void> {
  const outcome = runOutcome(run.team, run);
  const ended = await context.runs.updateRun(
    run.id,
    { status: outcome.status, result: outcome.result, error: outcome.failures.length > 0 ? outcome.failures.join("\n") : undefined, completedAt: context.now() },
    RUNNING_RUN,
  );
  if (!ended) return; // another worker ended it, or it was cancelled
  context.logger?.info({ runId: run.id, team: run.teamName, sessionKey: run.sessionKey, status: ended.status, durationMs: (ended.completedAt ?? 0) - run.createdAt }, "workflow run ended");
  emit(context, ended.status === "completed" ? "run-completed" : "run-failed", ended);
  await announce(context, ended);
}

/** Cancels the nodes of an ended run that had not settled, aborting the queued and running ones' jobs wherever they run. */
async function stopNodes(context: RunContext, ended: WorkflowRun, error: string): Promise<void> {
  const { runs, queue, logger, now } = context;
  for (const node of ended.nodes) {
    if (SETTLED_NODE_STATUSES.has(node.status)) continue;
    await runs.updateNode(ended.id, node.id, { status: "cancelled", completedAt: now(), error }, { from: ["pending", "queued", "running"] });
    if (ACTIVE_NODE_STATUSES.has(node.status)) {
      await queue.cancel(nodeJobId(ended.id, node.id)).catch((failure: unknown) => logger?.warn({ err: failure, runId: ended.id, nodeId: node.id }, "could not cancel a workflow node's job"));
    }
  }
}

/**
 * A node was refused for a used-up budget: the run ends "failed" with its error starting "budget
 * exhausted", what its finished agents wrote kept as the result, and its other nodes stopped
 * wherever they run (they would be refused at their next call anyway).
 */
export async function stopForBudget(context: RunContext, runId: string, reason: string): Promise<void> {
  const { runs, logger, now } = context;
  const current = await runs.get(runId);
  if (!current || current.status !== "running") return;
  const finished = current.nodes.filter((node) => node.status === "completed");
  const result = finished.map((node) => `## ${describeNode(current.team, node)}\n${node.output ?? ""}`).join("\n\n");
  const error = reason.startsWith(BUDGET_STOP) ? reason : `${BUDGET_STOP}: ${reason}`;
  const stopped = await runs.updateRun(runId, { status: "failed", error, ...(result ? { result } : {}), completedAt: now() }, UNFINISHED_RUN);
  if (!stopped) return;
  logger?.warn({ runId, team: stopped.teamName, sessionKey: stopped.sessionKey, finished: finished.length }, "workflow run stopped: a budget is used up");
  await stopNodes(context, stopped, BUDGET_STOP);
  const after = (await runs.get(runId)) ?? stopped;
  emit(context, "run-failed", after);
  await announce(context, after);
}

/** Cancels a run wherever its nodes run. The run as it is afterwards; undefined when unknown. */
export async function cancelRun(context: RunContext, runId: string): Promise<WorkflowRun | undefined> {
  const { runs, logger, now } = context;
  const cancelled = await runs.updateRun(runId, { status: "cancelled", completedAt: now() }, UNFINISHED_RUN);
  if (!cancelled) return runs.get(runId);
  logger?.info({ runId, team: cancelled.teamName, sessionKey: cancelled.sessionKey }, "workflow run cancelled");
  // Before the chat hears of it: the running agents stop now, wherever they run.
  await stopNodes(context, cancelled, "the run was cancelled");
  const after = (await runs.get(runId)) ?? cancelled;
  emit(context, "run-cancelled", after);
  await announce(context, after);
  return after;
}
