/**
 * council: one node per member (round one); with cross-review a `<id>.review` node per member that
 * requires its own round-one node and waits for the others' (whatever became of them); then
 * `_synthesis`, which waits for every final-round node. The result is the synthesis.
 */
import { type NodePlan, type TeamMode, agentNodes } from "./team-mode.js";

export const SYNTHESIS_NODE = "_synthesis";
export const REVIEW_SUFFIX = ".review";

export const councilMode: TeamMode = {
  plan(team) {
    const { agents } = team;
    const members = agentNodes(team, () => []);
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
  },
  finalNodes: () => [SYNTHESIS_NODE],
};
