/**
 * One node's job, on whichever worker takes it: it finds what the run needs of it (nothing, only an
 * advance, a failure after too many dead workers, or a run), runs the node's agent under the
 * team's timeout, records its tool calls and streamed text, settles it and moves the run on.
 */
import { BudgetExhaustedError, errorMessage } from "../../errors.js";
import { type NodeState, SETTLED_NODE_STATUSES, type WorkflowRun } from "../../store/team-record.js";
import type { TaskToolCall } from "../../store/task-record.js";
import type { Job } from "../job-queue.js";
import { type WorkflowJobData, WorkflowJobDataSchema } from "./node-job.js";
import { type PromptContext, nodePrompt } from "./prompts.js";
import { RUNNING_RUN, type RunContext, advance, emit, nodeOf, settle, stopForBudget } from "./run-steps.js";
import type { RunTeamAgent } from "./team-agent.js";

/** A node run this often (the first run included) whose worker went away is failed, not run again. */
const MAX_NODE_RUNS = 2;
const MAX_TOOL_CALLS = 100;
const CHUNK_INTERVAL_MS = 1_000;
const MAX_CHUNK_CHARS = 4_000;

/** What running a node needs besides the run's steps: the agent runner and what its prompt names. */
export interface NodeRunContext extends RunContext {
  runAgent: RunTeamAgent;
  promptContext: () => Omit<PromptContext, "now">;
}

/** How a node's agent ended: its output, or an error (`budget` when a used-up budget refused it). */
type NodeOutcome = { output: string; model: string; usage?: NodeState["usage"] } | { error: string; budget?: true };

/** The queue's job handler: runs one node and advances its run. */
export async function executeNode(context: NodeRunContext, job: Job<WorkflowJobData>): Promise<void> {
  const { runs, logger } = context;
  const { runId, nodeId, recovered } = WorkflowJobDataSchema.parse(job.data);
  const run = await runs.get(runId);
  const node = run && nodeOf(run, nodeId);
  if (!run || !node) return; // deleted
  if (run.status !== "running") return; // cancelled or ended: nothing to do
  if (SETTLED_NODE_STATUSES.has(node.status)) {
    // Finished by an earlier run of this job whose worker died before it moved the run on.
    await advance(context, runId, run);
    return;
  }
  if (node.status === "pending") return; // not queued by the engine: a stray job
  const resumed = node.status === "running" && (job.attempt > 1 || recovered === true);
  if (resumed && node.attempts >= MAX_NODE_RUNS) {
    const times = node.attempts === 2 ? "twice" : `${node.attempts} times`;
    const settled = await settle(context, run, nodeId, "failed", { error: `its worker died ${times} before it finished` }, ["running"]);
    if (settled) await advance(context, runId, settled);
    return;
  }
  if (resumed) logger?.warn({ runId, nodeId, jobId: job.id, attempt: node.attempts + 1 }, "running a workflow node again: its worker stopped before it finished");
  await runNode(context, job, run, node);
}

/**
 * The signal a node's agent runs under: the job's (cancel, shutdown) and the team's node timeout.
 * `dispose` clears the timer and the listener once the agent is done.
 */
function nodeSignal(job: Job<WorkflowJobData>, run: WorkflowRun): { signal: AbortSignal; timedOut: () => boolean; dispose: () => void } {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error(`timed out after ${run.team.nodeTimeoutSeconds} s`));
  }, run.team.nodeTimeoutSeconds * 1000);
  const onAbort = () => controller.abort(job.signal.reason);
  job.signal.addEventListener("abort", onAbort, { once: true });
  if (job.signal.aborted) onAbort();
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    dispose: () => {
      clearTimeout(timer);
      job.signal.removeEventListener("abort", onAbort);
    },
  };
}

/** Runs the node's agent and records how it ended. */
async function runNode(context: NodeRunContext, job: Job<WorkflowJobData>, run: WorkflowRun, node: NodeState): Promise<void> {
  const { runs, logger, now } = context;
  const log = logger?.child({ runId: run.id, nodeId: node.id, jobId: job.id, sessionKey: run.sessionKey });
  const prompt = nodePrompt(run, node.id, { ...context.promptContext(), now: new Date(now()) });
  const started = await runs.updateNode(run.id, node.id, { status: "running", startedAt: now(), attempts: node.attempts + 1, toolCalls: [], input: prompt.input }, { from: ["queued", "running"], runFrom: RUNNING_RUN });
  if (!started) return; // cancelled meanwhile
  const current = nodeOf(started, node.id)!;
  log?.info({ attempt: current.attempts }, "workflow node started");
  emit(context, "node-started", started, current);

  const guard = nodeSignal(job, run);
  const toolCalls: TaskToolCall[] = [];
  const onToolCall = async (call: TaskToolCall) => {
    toolCalls.push(call);
    try {
      const updated = await runs.updateNode(run.id, node.id, { toolCalls: toolCalls.slice(-MAX_TOOL_CALLS) }, { from: ["running"] });
      const state = updated && nodeOf(updated, node.id);
      if (updated && state) emit(context, "node-tool", updated, state, call);
    } catch (error) {
      log?.warn({ err: error }, "could not record a tool call");
    }
  };
  const agent = run.team.agents.find((candidate) => candidate.id === node.agentId);
  let outcome: NodeOutcome;
  try {
    // Streamed text, at most once a second per node: lossy by design, the output is kept whole on the run.
    let chunkAt = Number.NEGATIVE_INFINITY;
    const onText = (text: string) => {
      if (now() - chunkAt < CHUNK_INTERVAL_MS) return;
      chunkAt = now();
      emit(context, "node-chunk", started, current, undefined, text.slice(-MAX_CHUNK_CHARS));
    };
    outcome = await context.runAgent({ run: started, node: current, agent, system: prompt.system, input: prompt.input, signal: guard.signal, onToolCall, onText });
  } catch (error) {
    if (guard.timedOut()) outcome = { error: `timed out after ${run.team.nodeTimeoutSeconds} s (nodeTimeoutSeconds)` };
    else if (job.signal.aborted) {
      const after = await runs.get(run.id);
      const state = after && nodeOf(after, node.id);
      // cancel() ended it and told the chat already.
      if (!after || after.status !== "running" || !state || SETTLED_NODE_STATUSES.has(state.status)) return;
      // A shutdown: the queue runs the job again elsewhere, which runs the node again.
      throw error;
    } else outcome = error instanceof BudgetExhaustedError ? { error: errorMessage(error), budget: true } : { error: errorMessage(error) };
  } finally {
    guard.dispose();
  }
  if ("error" in outcome) log?.warn({ error: outcome.error }, "workflow node failed");
  await settleNode(context, started, node.id, outcome, toolCalls.slice(-MAX_TOOL_CALLS));
}

/** Stores how the node ended, then moves the run on, or stops it when a used-up budget refused the node. */
async function settleNode(context: NodeRunContext, started: WorkflowRun, nodeId: string, outcome: NodeOutcome, toolCalls: TaskToolCall[]): Promise<void> {
  const patch = "error" in outcome ? { error: outcome.error, toolCalls } : { output: outcome.output, model: outcome.model, toolCalls, ...(outcome.usage ? { usage: outcome.usage } : {}) };
  const settled = await settle(context, started, nodeId, "error" in outcome ? "failed" : "completed", patch, ["running"]);
  if (settled && "budget" in outcome) await stopForBudget(context, started.id, outcome.error);
  else if (settled) await advance(context, started.id, settled);
}
