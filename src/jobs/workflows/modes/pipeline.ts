/** pipeline: one node per agent, each requiring the one before; the result is the last stage's. */
import { type TeamMode, agentNodes } from "./team-mode.js";

export const pipelineMode: TeamMode = {
  plan: (team) => agentNodes(team, (index) => (index === 0 ? [] : [team.agents[index - 1]!.id])),
  finalNodes: (plan) => [plan.at(-1)!.id],
};
