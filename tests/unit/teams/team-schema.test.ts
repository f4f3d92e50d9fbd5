import { describe, expect, it } from "vitest";
import { formatPath } from "../../../src/config/issues.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { TeamDefinitionSchema, findCycle } from "../../../src/config/team.js";

/** Every issue as `path: message`, the way the API and the config loader report them. */
function problems(input: unknown): string[] {
  const result = TeamDefinitionSchema.safeParse(input);
  if (result.success) return [];
  return result.error.issues.map((issue) => `${formatPath(issue.path)}: ${issue.message}`);
}

const analysts = [
  { id: "frontend", role: "Frontend analyst", task: "analyse the front end" },
  { id: "backend", role: "Backend analyst", task: "analyse the back end" },
  { id: "integrator", role: "Architect", task: "combine", dependsOn: ["frontend", "backend"] },
];

describe("team validation", () => {
  it("accepts a graph team and fills in the defaults", () => {
    const team = TeamDefinitionSchema.parse({ name: "Project Analysis", mode: "graph", agents: analysts });
    expect(team).toMatchObject({ description: "", enabled: true, crossReview: false, maxIterations: 10, nodeTimeoutSeconds: 600 });
    expect(team.agents[0]?.dependsOn).toEqual([]);
  });

  it("refuses a cycle at creation, naming the agents in it", () => {
    const cyclic = [
      { id: "a", role: "A", task: "a", dependsOn: ["c"] },
      { id: "b", role: "B", task: "b", dependsOn: ["a"] },
      { id: "c", role: "C", task: "c", dependsOn: ["b"] },
      { id: "d", role: "D", task: "d", dependsOn: ["a"] },
    ];
    expect(problems({ name: "Loop", mode: "graph", agents: cyclic })).toEqual(["agents[0].dependsOn: dependency cycle: a → c → b → a; a graph must not loop back"]);
    expect(problems({ name: "Self", mode: "graph", agents: [{ id: "a", role: "A", task: "a", dependsOn: ["a"] }] })).toEqual([
      "agents[0].dependsOn: dependency cycle: a → a; a graph must not loop back",
    ]);
  });

  it("names a duplicate id and an unknown dependency by their fields", () => {
    const agents = [...analysts, { id: "backend", role: "Again", task: "x", dependsOn: ["database"] }];
    expect(problems({ name: "Broken", mode: "graph", agents })).toEqual([
      'agents[3].id: duplicate agent id "backend" (agents[1] has it too)',
      'agents[3].dependsOn[0]: unknown agent "database": no agent of this team has that id',
    ]);
  });

  it("asks each mode for its own fields and refuses the others'", () => {
    expect(problems({ name: "Council", mode: "council", crossReview: true, agents: [{ id: "a", role: "A", perspective: "cost" }, { id: "b", role: "B" }] })).toEqual([
      "agents[1].perspective: a council member needs a perspective: the angle it argues from",
    ]);
    expect(problems({ name: "Lonely", mode: "council", agents: [{ id: "a", role: "A", perspective: "cost" }] })).toEqual(["agents: a council needs at least two members"]);
    expect(problems({ name: "Pipe", mode: "pipeline", crossReview: true, agents: [{ id: "a", role: "A" }, { id: "b", role: "B", task: "t", dependsOn: ["a"] }] })).toEqual([
      "crossReview: crossReview is for council teams; this team's mode is pipeline",
      "agents[0].task: a pipeline stage needs a task: what this stage does",
      "agents[1].dependsOn: dependsOn is for graph teams; a pipeline runs its agents in the order listed",
    ]);
    expect(problems({ name: "Graph", mode: "graph", agents: [{ id: "a", role: "A" }] })).toEqual(["agents[0].task: a graph agent needs a task: what it does toward the goal"]);
  });

  it("checks a condition against the agent's own dependencies", () => {
    const agents = [
      { id: "triage", role: "T", task: "t" },
      { id: "fix", role: "F", task: "f", condition: { node: "triage", outputContains: "bug" } },
      { id: "both", role: "B", task: "b", dependsOn: ["triage"], condition: { node: "triage", outputContains: "x", outputNotContains: "y" } },
    ];
    expect(problems({ name: "Cond", mode: "graph", agents })).toEqual([
      'agents[1].condition.node: "triage" must be in this agent\'s dependsOn: a condition reads an upstream output',
      "agents[2].condition: a condition needs exactly one of outputContains and outputNotContains",
    ]);
  });

  it("takes names of any script but not the characters the triggers use", () => {
    expect(problems({ name: "文档处理团队", mode: "pipeline", agents: [{ id: "a", role: "A", task: "t" }] })).toEqual([]);
    for (const name of ["@team", "/team", "two  spaces", "a:b"]) expect(problems({ name, mode: "pipeline", agents: [{ id: "a", role: "A", task: "t" }] })[0]).toMatch(/^name: /);
  });

  it("finds no cycle in a diamond", () => {
    expect(findCycle([{ id: "a", dependsOn: [] }, { id: "b", dependsOn: ["a"] }, { id: "c", dependsOn: ["a"] }, { id: "d", dependsOn: ["b", "c"] }])).toBeUndefined();
  });
});

describe("teams in the config file", () => {
  it("names the field of a bad team and refuses names that differ only in case", () => {
    const cyclic = ConfigSchema.safeParse({ teams: { Loop: { mode: "graph", agents: [{ id: "a", role: "A", task: "a", dependsOn: ["a"] }] } } });
    expect(cyclic.success).toBe(false);
    expect(cyclic.error?.issues.map((issue) => formatPath(issue.path))).toEqual(["teams.Loop.agents[0].dependsOn"]);
    const twice = ConfigSchema.safeParse({ teams: { Research: { mode: "pipeline", agents: analysts.slice(0, 1) }, research: { mode: "pipeline", agents: analysts.slice(0, 1) } } });
    expect(twice.error?.issues.map((issue) => `${formatPath(issue.path)}: ${issue.message}`)).toEqual(['teams.research: the same name as team "Research": team names are compared without case']);
  });
});
