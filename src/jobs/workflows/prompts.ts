/**
 * What each node of a run is told: a system prompt (who it is in the team) and the user message
 * (the goal plus what it builds on). Pipeline stages get every earlier stage's output; graph nodes
 * their dependencies' outputs; council members the goal and their perspective, in the cross-review
 * the others' positions, and the synthesis every final position and which members failed.
 */
import { safetySection } from "../../prompt/sections.js";
import type { TeamAgent } from "../../config/team.js";
import type { NodeState, TeamRecord, WorkflowRun } from "../../store/team-record.js";
import { REVIEW_SUFFIX, describeNode, planNodes } from "./plan.js";

export interface NodePrompt {
  system: string;
  input: string;
}

export interface PromptContext {
  workspace: string;
  now: Date;
  toolNames: string[];
}

export function nodePrompt(run: WorkflowRun, nodeId: string, context: PromptContext): NodePrompt {
  const team = run.team;
  const node = run.nodes.find((candidate) => candidate.id === nodeId);
  if (!node) throw new Error(`run ${run.id} has no node ${nodeId}`);
  const agent = team.agents.find((candidate) => candidate.id === node.agentId);
  return { system: systemPrompt(team, node, agent, context), input: userPrompt(run, node, agent) };
}

function systemPrompt(team: TeamRecord, node: NodeState, agent: TeamAgent | undefined, context: PromptContext): string {
  const who =
    node.kind === "synthesis"
      ? `# Council synthesis\nYou chair the council "${team.name}". Its members have analysed one goal, each from their own perspective. Write the council's one answer.`
      : `# Team agent\nYou are ${agent?.role ?? node.agentId}, one agent of the team "${team.name}" (${team.mode}).${team.description ? ` The team: ${team.description}` : ""}`;
  const own = node.kind !== "synthesis" && agent?.systemPrompt?.trim() ? `\n\n${agent.systemPrompt.trim()}` : "";
  return [
    `${who}${own}`,
    `# How to work
- Do your part of the goal with your tools, completely, and nothing else. Nobody reads along; you cannot ask questions, so make reasonable choices and say which.
- Your last message is your contribution: other agents of the team and its final report build on it. Make it complete and to the point; no greetings, no offers of more help.`,
    safetySection,
    // The clock last: everything before it is the same in every run of this agent, for prompt caches.
    `# Environment
Your workspace (the root of every relative file path) is ${context.workspace}.
Your tools: ${context.toolNames.length > 0 ? context.toolNames.join(", ") : "none"}.
Current time: ${context.now.toISOString()}.`,
  ].join("\n\n");
}

function userPrompt(run: WorkflowRun, node: NodeState, agent: TeamAgent | undefined): string {
  const team = run.team;
  const states = new Map(run.nodes.map((state) => [state.id, state]));
  const goal = `Goal: ${run.goal}`;
  const section = (state: NodeState, label = describeNode(team, state)) => `## ${label}\n${state.output ?? ""}`;

  if (node.kind === "synthesis") {
    const finalRound = planNodes(team).find((plan) => plan.id === node.id)?.after ?? [];
    const positions = finalRound.map((id) => states.get(id)!).filter((state) => state.status === "completed");
    const missing = finalRound.map((id) => states.get(id)!).filter((state) => state.status !== "completed");
    const parts = [goal, `The council's ${team.crossReview ? "final (cross-reviewed) " : ""}positions:`, ...positions.map((state) => section(state, memberLabel(team, state.agentId)))];
    if (missing.length > 0) parts.push(`Members without a position (they failed): ${missing.map((state) => `${memberLabel(team, state.agentId)}: ${state.error ?? state.status}`).join("; ")}.`);
    parts.push("Synthesize them into one answer to the goal: where the members agree, where they differ and why, and a clear recommendation.");
    return parts.join("\n\n");
  }

  if (node.kind === "review") {
    const own = states.get(node.agentId);
    const others = team.agents.filter((other) => other.id !== node.agentId).map((other) => states.get(other.id)!);
    const parts = [goal, `Your perspective: ${agent?.perspective ?? ""}`, `Your first analysis:\n${own?.output ?? ""}`, "The other members' positions:"];
    parts.push(...others.filter((state) => state.status === "completed").map((state) => section(state, memberLabel(team, state.agentId))));
    const failed = others.filter((state) => state.status !== "completed");
    if (failed.length > 0) parts.push(`Members without a position (they failed): ${failed.map((state) => memberLabel(team, state.agentId)).join(", ")}.`);
    parts.push("Evaluate the other members' views from your perspective, then give your refined analysis.");
    return parts.join("\n\n");
  }

  if (team.mode === "council") {
    return [goal, `Analyse it from the perspective of ${agent?.perspective ?? "your role"}, and give your position with its reasons.`].join("\n\n");
  }

  const parts = [goal, `Your task: ${agent?.task ?? agent?.role ?? node.agentId}`];
  const upstreamIds = team.mode === "pipeline" ? run.nodes.slice(0, run.nodes.indexOf(node)).map((state) => state.id) : (agent?.dependsOn ?? []);
  const upstream = upstreamIds.map((id) => states.get(id)!).filter(Boolean);
  const done = upstream.filter((state) => state.status === "completed");
  if (done.length > 0) parts.push(team.mode === "pipeline" ? "The earlier stages' outputs:" : "The outputs of the agents you build on:", ...done.map((state) => section(state)));
  const skipped = upstream.filter((state) => state.status === "skipped");
  if (skipped.length > 0) parts.push(`Skipped (their condition did not hold), so there is no output from: ${skipped.map((state) => describeNode(team, state)).join(", ")}.`);
  return parts.join("\n\n");
}

function memberLabel(team: TeamRecord, agentId: string): string {
  const agent = team.agents.find((candidate) => candidate.id === agentId);
  return agent ? `${agent.role} (${agent.perspective ?? agent.id})` : agentId.replace(REVIEW_SUFFIX, "");
}
