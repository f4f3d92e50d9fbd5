/**
 * What a team's run consists of, and what comes next: pure functions of the team and the run's
 * node states, so the engine (./engine.ts) only stores and queues, and the rules are tested alone.
 *
 * - pipeline: one node per agent, each requiring the one before.
 * - graph: one node per agent, requiring its `dependsOn`; a node starts as soon as those are
 *   done, not when a whole "wave" is; an unmet condition skips it. A skipped dependency counts as
 *   done (the dependent is told it was skipped); a failed one marks the dependent "upstream failed".
 * - council: one node per member (round one); with cross-review a `<id>.review` node per member
 *   that requires its own round-one node and waits for the others' (whatever became of them);
 *   then `_synthesis`, which waits for every final-round node and runs if any of them completed.
 */
import type { TeamAgent, TeamCondition } from "../../config/team.js";
import type { NodeState, NodeStatus, TeamRecord, WorkflowRun } from "../../store/team-record.js";
import { SETTLED_NODE_STATUSES } from "../../store/team-record.js";

export const SYNTHESIS_NODE = "_synthesis";
export const REVIEW_SUFFIX = ".review";

export interface NodePlan {
  id: string;
  agentId: string;
  kind: NodeState["kind"];
  /** Must have completed (or been skipped); if one failed, this node is upstream-failed. */
  requires: string[];
  /** Must have settled, whatever the outcome, before this node starts. */
  after: string[];
}

/** Statuses of a required node that make its dependents upstream-failed. */
const BROKEN: ReadonlySet<NodeStatus> = new Set(["failed", "upstream-failed", "cancelled"]);

export function planNodes(team: Pick<TeamRecord, "mode" | "agents" | "crossReview">): NodePlan[] {
  const { agents } = team;
  if (team.mode === "pipeline") {
    return agents.map((agent, index) => ({ id: agent.id, agentId: agent.id, kind: "agent", requires: index === 0 ? [] : [agents[index - 1]!.id], after: [] }));
  }
  if (team.mode === "graph") {
    return agents.map((agent) => ({ id: agent.id, agentId: agent.id, kind: "agent", requires: [...agent.dependsOn], after: [] }));
  }
  const members: NodePlan[] = agents.map((agent) => ({ id: agent.id, agentId: agent.id, kind: "agent", requires: [], after: [] }));
  const reviews: NodePlan[] = team.crossReview
    ? agents.map((agent) => ({
        id: `${agent.id}${REVIEW_SUFFIX}`,
        agentId: agent.id,
        kind: "review",
        requires: [agent.id],
        after: agents.filter((other) => other.id !== agent.id).map((other) => other.id),
      }))
    : [];
  const finalRound = (reviews.length > 0 ? reviews : members).map((node) => node.id);
  return [...members, ...reviews, { id: SYNTHESIS_NODE, agentId: SYNTHESIS_NODE, kind: "synthesis", requires: [], after: finalRound }];
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
export function nextSteps(team: Pick<TeamRecord, "mode" | "agents" | "crossReview">, run: Pick<WorkflowRun, "nodes">): NextSteps {
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
export function finalNodes(team: Pick<TeamRecord, "mode" | "agents" | "crossReview">): string[] {
  const plan = planNodes(team);
  if (team.mode === "pipeline") return [plan.at(-1)!.id];
  if (team.mode === "council") return [SYNTHESIS_NODE];
  const needed = new Set(plan.flatMap((node) => node.requires));
  return plan.filter((node) => !needed.has(node.id)).map((node) => node.id);
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
