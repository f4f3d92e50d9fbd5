/**
 * graph: one node per agent, requiring its `dependsOn`; a node starts as soon as those are done,
 * not when a whole "wave" is. The result is the sinks': the nodes nothing requires.
 */
import { type TeamMode, agentNodes } from "./team-mode.js";

export const graphMode: TeamMode = {
  plan: (team) => agentNodes(team, (index) => [...team.agents[index]!.dependsOn]),
  finalNodes(plan) {
    const needed = new Set(plan.flatMap((node) => node.requires));
    return plan.filter((node) => !needed.has(node.id)).map((node) => node.id);
  },
};
