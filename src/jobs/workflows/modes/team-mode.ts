/**
 * A team mode: how a team's agents become a run's nodes, and which nodes' outputs are the result.
 * One file per mode (pipeline, graph, council), each with a table test; the engine and the
 * planning rules in ../plan.ts know modes only through this interface.
 */
import type { NodeState, TeamRecord } from "../../../store/team-record.js";

export type TeamShape = Pick<TeamRecord, "mode" | "agents" | "crossReview">;

export interface NodePlan {
  id: string;
  agentId: string;
  kind: NodeState["kind"];
  /** Must have completed (or been skipped); if one failed, this node is upstream-failed. */
  requires: string[];
  /** Must have settled, whatever the outcome, before this node starts. */
  after: string[];
}

export interface TeamMode {
  /** The nodes of a run of `team`, in a stable order. */
  plan(team: TeamShape): NodePlan[];
  /** The nodes whose outputs make the run's result, given the plan. */
  finalNodes(plan: NodePlan[]): string[];
}

/** One node per agent, requiring what `requires` says of it. */
export function agentNodes(team: TeamShape, requires: (index: number) => string[]): NodePlan[] {
  return team.agents.map((agent, index) => ({ id: agent.id, agentId: agent.id, kind: "agent", requires: requires(index), after: [] }));
}
