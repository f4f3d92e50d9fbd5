/**
 * What a team's run consists of, and what comes next: pure functions of the team and the run's
 * node states, so the engine (./engine.ts) only stores and queues, and the rules are tested alone.
 * The modes' own shapes are in ./modes/ (one file each). The rules here hold for every mode: a
 * node starts once what it requires is done and what it waits `after` has settled; an unmet
 * condition skips it; a skipped dependency counts as done (the dependent is told it was skipped); a
 * failed one marks the dependent "upstream failed"; the synthesis runs if any member completed.
 */
import type { TeamAgent, TeamCondition } from "../../config/team.js";
import type { NodeState, NodeStatus, TeamRecord, WorkflowRun } from "../../store/team-record.js";
import { SETTLED_NODE_STATUSES } from "../../store/team-record.js";
import { type NodePlan, type TeamShape, teamModes } from "./modes/index.js";

export { REVIEW_SUFFIX, SYNTHESIS_NODE } from "./modes/index.js";
export type { NodePlan } from "./modes/index.js";

/** Statuses of a required node that make its dependents upstream-failed. */
const BROKEN: ReadonlySet<NodeStatus> = new Set(["failed", "upstream-failed", "cancelled"]);

export function planNodes(team: TeamShape): NodePlan[] {
  return teamModes[team.mode].plan(team);
}

/** A fresh node state for each planned node. */
export function initialNodes(plan: NodePlan[]): NodeState[] {
  return plan.map((node) => ({ id: node.id, agentId: node.agentId, kind: node.kind, status: "pending", toolCalls: [], attempts: 0 }));
}

export interface NextSteps {
  /** Pending nodes whose dependencies are done: queue them. */
  start: string[];
  /** Pending nodes whose condition does not hold. */
  skip: Array<{ id: string; reason: string }>;
  /** Pending nodes that cannot run because a node they need failed. */
  upstreamFailed: Array<{ id: string; reason: string }>;
}

/** What to do with the run's pending nodes now. */
export function nextSteps(team: TeamShape, run: Pick<WorkflowRun, "nodes">): NextSteps {
  const states = new Map(run.nodes.map((node) => [node.id, node]));
  const agents = new Map(team.agents.map((agent) => [agent.id, agent]));
  const steps: NextSteps = { start: [], skip: [], upstreamFailed: [] };
  for (const node of planNodes(team)) {
    if (states.get(node.id)?.status !== "pending") continue;
    const broken = node.requires.filter((id) => BROKEN.has(states.get(id)?.status ?? "pending"));
    if (broken.length > 0) {
      steps.upstreamFailed.push({ id: node.id, reason: `upstream ${broken.length === 1 ? "agent" : "agents"} ${broken.join(", ")} failed` });
      continue;
    }
    const waitingFor = [...node.requires, ...node.after].filter((id) => !SETTLED_NODE_STATUSES.has(states.get(id)?.status ?? "pending"));
    if (waitingFor.length > 0) continue;
    if (node.kind === "synthesis" && !node.after.some((id) => states.get(id)?.status === "completed")) {
      steps.upstreamFailed.push({ id: node.id, reason: "no council member finished: nothing to synthesize" });
      continue;
    }
    const condition = agents.get(node.agentId)?.condition;
    const unmet = node.kind === "agent" && condition ? unmetCondition(condition, states.get(condition.node)) : undefined;
    if (unmet) steps.skip.push({ id: node.id, reason: unmet });
    else steps.start.push(node.id);
  }
  return steps;
}

/** Why the condition does not hold, or undefined when it does. A skipped upstream node has no output. */
export function unmetCondition(condition: TeamCondition, upstream: NodeState | undefined): string | undefined {
  const output = (upstream?.status === "completed" ? (upstream.output ?? "") : "").toLowerCase();
  if (condition.outputContains !== undefined && !output.includes(condition.outputContains.toLowerCase())) {
    return `condition not met: ${condition.node}'s output does not contain "${condition.outputContains}"`;
  }
  if (condition.outputNotContains !== undefined && output.includes(condition.outputNotContains.toLowerCase())) {
    return `condition not met: ${condition.node}'s output contains "${condition.outputNotContains}"`;
  }
  return undefined;
}

export function allSettled(run: Pick<WorkflowRun, "nodes">): boolean {
  return run.nodes.every((node) => SETTLED_NODE_STATUSES.has(node.status));
}

/** The nodes whose outputs make the result: the last stage, the graph's sinks, the synthesis. */
export function finalNodes(team: TeamShape): string[] {
  return teamModes[team.mode].finalNodes(planNodes(team));
}

export interface RunOutcome {
  status: "completed" | "failed";
  result: string;
  /** Failed and upstream-failed nodes, for the chat: `frontend failed: ...`. */
  failures: string[];
}

/** How a run whose nodes have all settled ended: completed when a final node completed (or every final one was skipped and none failed). */
export function runOutcome(team: TeamRecord, run: Pick<WorkflowRun, "nodes">): RunOutcome {
  const states = new Map(run.nodes.map((node) => [node.id, node]));
  const finals = finalNodes(team).map((id) => states.get(id)!);
  const completed = finals.filter((node) => node.status === "completed");
  const failures = run.nodes
    .filter((node) => node.status === "failed" || node.status === "upstream-failed")
    .map((node) => `${describeNode(team, node)} ${node.status === "failed" ? "failed" : "did not run"}: ${node.error ?? "unknown error"}`);
  const skippedOnly = finals.every((node) => node.status === "skipped");
  const status = completed.length > 0 || (skippedOnly && failures.length === 0) ? "completed" : "failed";
  const result =
    completed.length === 1
      ? completed[0]!.output ?? ""
      : completed.map((node) => `## ${describeNode(team, node)}\n${node.output ?? ""}`).join("\n\n");
  return { status, result, failures };
}

/** `Backend analyst (backend)`, `Backend analyst (backend, cross-review)`, `the synthesis`. */
export function describeNode(team: Pick<TeamRecord, "agents">, node: Pick<NodeState, "id" | "agentId" | "kind">): string {
  if (node.kind === "synthesis") return "the synthesis";
  const agent: TeamAgent | undefined = team.agents.find((candidate) => candidate.id === node.agentId);
  const role = agent?.role ?? node.agentId;
  return node.kind === "review" ? `${role} (${node.agentId}, cross-review)` : `${role} (${node.agentId})`;
}
