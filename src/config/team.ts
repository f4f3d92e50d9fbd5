/**
 * An agent team: a named group of agents that work on one goal together, as a pipeline (each stage
 * after the previous one), a graph (a DAG: agents start as soon as the agents they depend on are
 * done) or a council (every member from its own perspective, an optional cross-review round, then
 * a synthesis). The schema is the source of the types; the checks a team's shape needs beyond
 * field types (duplicate ids, unknown dependencies, cycles, what each mode requires) are in
 * {@link checkTeam}, and every issue names the field it is about (`agents[2].dependsOn[0]`).
 *
 * It lives with the config because teams can be declared in the config file; the store keeps the
 * teams created through the API with the same schema (src/store/team-record.ts).
 */
import { z } from "zod";

export const TEAM_MODES = ["pipeline", "graph", "council"] as const;
export type TeamMode = (typeof TEAM_MODES)[number];

/** Letters of any script, digits, single spaces and `_ . & ' -`; no `@` or `/`, which the triggers use. */
const TEAM_NAME = /^[\p{L}\p{N}](?:[\p{L}\p{N}_.&'-]| (?=[^ ]))*$/u;

export const TeamNameSchema = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(TEAM_NAME, "letters, digits, single spaces and _ . & ' - only, starting with a letter or digit (it is typed after @ in chats)");

export const AgentIdSchema = z
  .string()
  .regex(/^[A-Za-z][\w-]{0,63}$/, "letters, digits, _ and - only, starting with a letter, at most 64 characters");

const ModelReferenceSchema = z.string().regex(/^[\w.-]+\/.+$/, "expected `provider/model`, e.g. openai/gpt-4o-mini");

export const TeamConditionSchema = z.strictObject({
  node: AgentIdSchema.describe("The upstream agent whose output decides; it must be in `dependsOn`."),
  outputContains: z.string().min(1).optional().describe("Run only when that agent's output contains this text (case-insensitive)."),
  outputNotContains: z.string().min(1).optional().describe("Run only when that agent's output does not contain this text (case-insensitive)."),
});
export type TeamCondition = z.infer<typeof TeamConditionSchema>;

export const TeamAgentSchema = z.strictObject({
  id: AgentIdSchema.describe("Unique within the team; what `dependsOn` and conditions name."),
  role: z.string().trim().min(1).max(200).describe("Who this agent is, e.g. `Backend analyst`."),
  systemPrompt: z.string().max(20_000).optional().describe("The agent's own instructions, before the team's shared ones."),
  task: z.string().max(20_000).optional().describe("What this agent does toward the goal (pipeline and graph: required)."),
  perspective: z.string().max(500).optional().describe("The angle a council member argues from (council: required)."),
  dependsOn: z.array(AgentIdSchema).default([]).describe("Graph: agents whose output this one needs; it starts as soon as they are done."),
  model: ModelReferenceSchema.optional().describe("`provider/model` for this agent; default: the team's model, then `agent.model`."),
  temperature: z.number().min(0).max(2).optional().describe("Sampling temperature for this agent; default: the team's, then `agent.temperature`."),
  maxIterations: z.number().int().min(1).max(100).optional().describe("Model calls (and tool calls) of this agent's run; default: the team's `maxIterations`."),
  condition: TeamConditionSchema.optional().describe("Graph: run only when an upstream agent's output matches; otherwise the agent is skipped."),
});
export type TeamAgent = z.infer<typeof TeamAgentSchema>;

/** The team's model settings (`/api/agent-teams/:id/config`): its own model, and a key or endpoint for it. */
export const TeamModelConfigSchema = z.strictObject({
  model: ModelReferenceSchema.optional().describe("`provider/model` every agent of the team uses unless it names its own."),
  apiKey: z.string().min(1).optional().describe("API key (secret) for the team model's provider, instead of `providers.<name>.apiKey`."),
  baseURL: z.url().optional().describe("Base URL of the team model's provider, instead of `providers.<name>.baseURL`."),
  temperature: z.number().min(0).max(2).optional().describe("Sampling temperature of the team's agents unless one sets its own."),
  maxTokens: z.number().int().positive().optional().describe("Maximum output tokens per model call of the team's agents."),
});
export type TeamModelConfig = z.infer<typeof TeamModelConfigSchema>;

/** A team's fields other than its name (the key of `teams` in the config file). */
export const teamShape = {
  description: z.string().max(2_000).default("").describe("What the team is for; shown in lists and to the model."),
  mode: z.enum(TEAM_MODES).describe("`pipeline`: agents in order, each given the earlier outputs; `graph`: a DAG by `dependsOn`; `council`: parallel perspectives, optional cross-review, then a synthesis."),
  enabled: z.boolean().default(true).describe("A disabled team cannot be started, by `@name`, `/team` or the workflow_run tool."),
  crossReview: z.boolean().default(false).describe("Council: after round one, each member sees the others' positions and revises its own."),
  maxIterations: z.number().int().min(1).max(100).default(10).describe("Model calls (and tool calls) of each agent's run, unless the agent sets its own."),
  nodeTimeoutSeconds: z.number().int().min(1).max(86_400).default(600).describe("An agent running longer than this fails (its dependents are marked upstream failed)."),
  maxParallel: z.number().int().min(1).max(64).optional().describe("Agents of one run that may run at once; default `workflows.perRunConcurrency`."),
  agents: z
    .array(TeamAgentSchema)
    .min(1)
    .max(32)
    .describe(
      "The team's agents, in order (a pipeline runs them in this order): `{ id, role, systemPrompt?, task?, perspective?, dependsOn[], model?, temperature?, maxIterations?, condition?: { node, outputContains | outputNotContains } }` (README, Agent teams).",
    ),
  modelConfig: TeamModelConfigSchema.optional().describe("The team's model settings."),
  agent: z
    .string()
    .regex(/^[A-Za-z0-9][\w-]{0,31}$/, "an agent profile id (a key of `agents`, or `default`)")
    .optional()
    .describe("The agent profile its runs run as, whichever chat starts them: that profile's workspace, tools and models (see README, Several bots). Default: the profile of the chat that starts it."),
};

type TeamShape = z.infer<z.ZodObject<typeof teamShape>>;

/** A team as declared: its name and {@link teamShape}'s fields. */
export const TeamDefinitionSchema = z.strictObject({ name: TeamNameSchema.describe("Unique (case-insensitively); how chats start it: `@name goal`."), ...teamShape }).superRefine(checkTeam);
export type TeamDefinition = z.infer<typeof TeamDefinitionSchema>;

/** A team under `teams.<name>` in the config file: the key is its name. */
export const TeamConfigEntrySchema = z.strictObject(teamShape).superRefine(checkTeam);

/** The key names are compared by: `Research Team` and `research team` are the same team. */
export function teamNameKey(name: string): string {
  return name.normalize("NFKC").trim().toLowerCase();
}

/** The shape checks of a team, each issue on the field it is about. Used as a zod superRefine. */
export function checkTeam(team: TeamShape, context: z.RefinementCtx): void {
  const issue = (path: PropertyKey[], message: string) => context.addIssue({ code: "custom", path, message });
  const firstIndex = new Map<string, number>();
  team.agents.forEach((agent, index) => {
    const seen = firstIndex.get(agent.id);
    if (seen === undefined) firstIndex.set(agent.id, index);
    else issue(["agents", index, "id"], `duplicate agent id "${agent.id}" (agents[${seen}] has it too)`);
  });
  if (team.crossReview && team.mode !== "council") issue(["crossReview"], `crossReview is for council teams; this team's mode is ${team.mode}`);

  team.agents.forEach((agent, index) => {
    agent.dependsOn.forEach((dependency, position) => {
      if (!firstIndex.has(dependency)) issue(["agents", index, "dependsOn", position], `unknown agent "${dependency}": no agent of this team has that id`);
    });
    if (team.mode === "graph") {
      if (!agent.task?.trim()) issue(["agents", index, "task"], "a graph agent needs a task: what it does toward the goal");
      const condition = agent.condition;
      if (condition) {
        if (!agent.dependsOn.includes(condition.node)) issue(["agents", index, "condition", "node"], `"${condition.node}" must be in this agent's dependsOn: a condition reads an upstream output`);
        const checks = Number(condition.outputContains !== undefined) + Number(condition.outputNotContains !== undefined);
        if (checks !== 1) issue(["agents", index, "condition"], "a condition needs exactly one of outputContains and outputNotContains");
      }
      return;
    }
    if (agent.dependsOn.length > 0) issue(["agents", index, "dependsOn"], `dependsOn is for graph teams; a ${team.mode} ${team.mode === "pipeline" ? "runs its agents in the order listed" : "runs its members side by side"}`);
    if (agent.condition) issue(["agents", index, "condition"], `condition is for graph teams; this team's mode is ${team.mode}`);
    if (team.mode === "pipeline" && !agent.task?.trim()) issue(["agents", index, "task"], "a pipeline stage needs a task: what this stage does");
    if (team.mode === "council" && !agent.perspective?.trim()) issue(["agents", index, "perspective"], "a council member needs a perspective: the angle it argues from");
  });
  if (team.mode === "council" && team.agents.length < 2) issue(["agents"], "a council needs at least two members");

  if (team.mode === "graph") {
    const cycle = findCycle(team.agents.filter((agent, index) => firstIndex.get(agent.id) === index));
    if (cycle) {
      const at = firstIndex.get(cycle[0]!)!;
      issue(["agents", at, "dependsOn"], `dependency cycle: ${[...cycle, cycle[0]].join(" → ")}; a graph must not loop back`);
    }
  }
}

/** A cycle in the agents' `dependsOn` (unknown ids ignored), as the ids along it; undefined when there is none. */
export function findCycle(agents: ReadonlyArray<Pick<TeamAgent, "id" | "dependsOn">>): string[] | undefined {
  const dependencies = new Map(agents.map((agent) => [agent.id, agent.dependsOn]));
  const state = new Map<string, "visiting" | "done">();
  const path: string[] = [];
  const visit = (id: string): string[] | undefined => {
    if (state.get(id) === "done") return undefined;
    if (state.get(id) === "visiting") return path.slice(path.indexOf(id));
    state.set(id, "visiting");
    path.push(id);
    for (const dependency of dependencies.get(id) ?? []) {
      if (!dependencies.has(dependency)) continue;
      const cycle = visit(dependency);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(id, "done");
    return undefined;
  };
  for (const agent of agents) {
    const cycle = visit(agent.id);
    if (cycle) return cycle;
  }
  return undefined;
}
