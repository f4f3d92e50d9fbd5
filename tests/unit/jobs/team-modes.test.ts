/** Each team mode's shape, as a table: the nodes a team becomes and which of them make the result. */
import { describe, expect, it } from "vitest";
import { teamModes } from "../../../src/jobs/workflows/modes/index.js";
import type { TeamShape } from "../../../src/jobs/workflows/modes/index.js";

function team(mode: TeamShape["mode"], agents: Array<{ id: string; dependsOn?: string[] }>, crossReview = false): TeamShape {
  return { mode, crossReview, agents: agents.map((agent) => ({ id: agent.id, role: agent.id, prompt: "", dependsOn: agent.dependsOn ?? [] })) } as unknown as TeamShape;
}

/** A plan as `id: requires | after` lines, easy to read in a table. */
function shape(shapeOf: TeamShape): { nodes: string[]; finals: string[] } {
  const mode = teamModes[shapeOf.mode];
  const plan = mode.plan(shapeOf);
  return { nodes: plan.map((node) => `${node.id} (${node.kind}): ${node.requires.join(",") || "-"} | ${node.after.join(",") || "-"}`), finals: mode.finalNodes(plan) };
}

describe("team modes", () => {
  it.each([
    {
      name: "pipeline: each stage requires the one before; the last stage is the result",
      team: team("pipeline", [{ id: "a" }, { id: "b" }, { id: "c" }]),
      nodes: ["a (agent): - | -", "b (agent): a | -", "c (agent): b | -"],
      finals: ["c"],
    },
    {
      name: "graph: each node requires its dependsOn; the sinks are the result",
      team: team("graph", [{ id: "root" }, { id: "left", dependsOn: ["root"] }, { id: "right", dependsOn: ["root"] }, { id: "side" }]),
      nodes: ["root (agent): - | -", "left (agent): root | -", "right (agent): root | -", "side (agent): - | -"],
      finals: ["left", "right", "side"],
    },
    {
      name: "council: members in parallel, then the synthesis after all of them",
      team: team("council", [{ id: "x" }, { id: "y" }]),
      nodes: ["x (agent): - | -", "y (agent): - | -", "_synthesis (synthesis): - | x,y"],
      finals: ["_synthesis"],
    },
    {
      name: "council with cross-review: each review requires its member and waits for the others; the synthesis waits for the reviews",
      team: team("council", [{ id: "x" }, { id: "y" }], true),
      nodes: ["x (agent): - | -", "y (agent): - | -", "x.review (review): x | y", "y.review (review): y | x", "_synthesis (synthesis): - | x.review,y.review"],
      finals: ["_synthesis"],
    },
  ])("$name", ({ team: shapeOf, nodes, finals }) => {
    expect(shape(shapeOf)).toEqual({ nodes, finals });
  });

  it("has a mode for every name the team schema allows", () => {
    expect(Object.keys(teamModes).sort()).toEqual(["council", "graph", "pipeline"]);
  });
});
