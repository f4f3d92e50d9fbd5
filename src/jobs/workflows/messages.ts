/**
 * What a team run says in the chat: the reply to a trigger, the short progress notices, and the
 * `system` message that brings the result into the origin session. That message ends with the
 * run's execution metadata as an HTML comment (mode, agents, tool calls, duration): kept in the
 * session's history with the message, for the model and for tools that read the history, not meant
 * for the platform.
 */
import type { TaskToolCall } from "../../store/task-record.js";
import type { NodeState, WorkflowRun } from "../../store/team-record.js";
import { describeNode } from "./plan.js";

export type WorkflowNoticeType = "run-started" | "node-started" | "node-chunk" | "node-tool" | "node-done" | "node-failed" | "node-skipped" | "run-completed" | "run-failed" | "run-cancelled";
/** What the engine tells its listeners: a run started or ended, or one of its nodes changed or called a tool. */
export interface WorkflowNotice {
  type: WorkflowNoticeType;
  run: WorkflowRun;
  node?: NodeState;
  /** `node-tool`: the call that just finished. */
  toolCall?: TaskToolCall;
  /** `node-chunk`: what the agent has written so far (its newest model call), for pages that stream it. */
  text?: string;
}

/** The longest result quoted in the end message; the whole result stays on the run. */
const MAX_MESSAGE_RESULT = 8_000;

/** "Team [Project Analysis] started (run ID: wf-...)." */
export function startedReply(run: Pick<WorkflowRun, "id" | "teamName" | "nodes">): string {
  return `Team [${run.teamName}] started (run ID: ${run.id}) with ${run.nodes.length} step${run.nodes.length === 1 ? "" : "s"}. I'll tell you when it is done; /stop cancels it.`;
}

/** A progress line for the chat, or undefined for notices the chat does not get. */
export function noticeText(notice: WorkflowNotice): string | undefined {
  const { run, node } = notice;
  const head = `Team [${run.teamName}]`;
  const name = node ? describeNode(run.team, node) : "";
  switch (notice.type) {
    case "node-started":
      return `${head}: ${name} started`;
    case "node-chunk":
      return `${head}: ${name} is writing`;
    case "node-tool":
      return `${head}: ${name} ran ${notice.toolCall?.name ?? "a tool"}${notice.toolCall?.success === false ? " (failed)" : ""}`;
    case "node-done":
      return `${head}: ${name} done`;
    case "node-failed":
      return `${head}: ${name} ${node?.status === "cancelled" ? "cancelled" : "failed"}${node?.error ? `: ${node.error}` : ""}`;
    case "node-skipped":
      return `${head}: ${name} skipped (${node?.error ?? "condition not met"})`;
    default:
      return undefined;
  }
}

/** The run's execution metadata, as the history keeps it. */
export function executionMetadata(run: WorkflowRun): string {
  const toolCalls = run.nodes.reduce((sum, node) => sum + node.toolCalls.length, 0);
  const duration = (run.completedAt ?? run.createdAt) - run.createdAt;
  const agents = run.nodes.filter((node: NodeState) => node.kind !== "review").length;
  return ["<!-- WORKFLOW_EXECUTION_METADATA", `run: ${run.id}`, `mode: ${run.mode}`, `agents: ${agents}`, `tool_calls: ${toolCalls}`, `duration: ${duration}ms`, "-->"].join("\n");
}

/** How a run stopped at a used-up budget is marked: its error starts with this. */
export const BUDGET_STOP = "budget exhausted";

/** Whether the run was stopped because a budget it counted against was used up. */
export function stoppedByBudget(run: Pick<WorkflowRun, "status" | "error">): boolean {
  return run.status === "failed" && (run.error?.startsWith(BUDGET_STOP) ?? false);
}

/** The `system` message that tells the origin session how a run ended. */
export function runEndMessage(run: WorkflowRun): string {
  const head = `Team [${run.teamName}] (run ID: ${run.id})`;
  const failures = run.error ? `\n\nNot every agent finished:\n${run.error.split("\n").map((line) => `- ${line}`).join("\n")}` : "";
  let body: string;
  const result = run.result ?? "";
  const quoted =
    result.length <= MAX_MESSAGE_RESULT
      ? result
      : `${result.slice(0, MAX_MESSAGE_RESULT)}\n\n[result shortened: ${result.length} characters in all; \`countbot runs show ${run.id}\` has the whole text]`;
  if (run.status === "completed") {
    body = `${head} completed.\n\nResult:\n${quoted}${failures}`;
  } else if (stoppedByBudget(run)) {
    body = `${head} stopped: ${run.error}.${result ? `\n\nWhat its finished agents wrote:\n${quoted}` : " No agent had finished."}`;
  } else if (run.status === "failed") {
    body = `${head} failed.${failures || `\n\n${run.error ?? "unknown error"}`}`;
  } else if (run.status === "cancelled") {
    body = `${head} was cancelled.`;
  } else {
    throw new Error(`run ${run.id} has not ended (${run.status})`);
  }
  return `${body}\n\n${executionMetadata(run)}`;
}
