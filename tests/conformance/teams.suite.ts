/**
 * The TeamStore and WorkflowRunStore conformance suite: the file store and the Redis store run it
 * unchanged.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { TeamStore, WorkflowRunStore } from "../../src/store/store.js";
import { type NodeState, TeamConflictError, type TeamRecord, type WorkflowRun } from "../../src/store/team-record.js";

export interface TeamStoreHarness {
  teams: TeamStore;
  runs: WorkflowRunStore;
  close: () => Promise<void>;
  cleanup: () => Promise<void>;
  /** New stores over the same backing storage, as after a restart. */
  reopen: () => Promise<{ teams: TeamStore; runs: WorkflowRunStore; close: () => Promise<void> }>;
}

const START = 1_700_000_000_000;

export function team(id: string, name: string, overrides: Partial<TeamRecord> = {}): TeamRecord {
  return {
    id,
    name,
    description: `the ${name} team`,
    mode: "graph",
    enabled: true,
    crossReview: false,
    maxIterations: 10,
    nodeTimeoutSeconds: 600,
    agents: [
      { id: "a", role: "first", task: "do a", dependsOn: [] },
      { id: "b", role: "second", task: "do b", dependsOn: ["a"], condition: { node: "a", outputContains: "yes" } },
    ],
    createdAt: START,
    updatedAt: START,
    ...overrides,
  };
}

function node(id: string, overrides: Partial<NodeState> = {}): NodeState {
  return { id, agentId: id, kind: "agent", status: "pending", toolCalls: [], attempts: 0, ...overrides };
}

export function run(id: string, overrides: Partial<WorkflowRun> = {}): WorkflowRun {
  return {
    id,
    teamId: "t1",
    teamName: "Research",
    mode: "graph",
    goal: `goal of ${id}`,
    sessionKey: "telegram:1",
    status: "running",
    team: team("t1", "Research"),
    nodes: [node("a"), node("b"), node("c")],
    createdAt: START,
    ...overrides,
  };
}

export function runTeamStoreSuite(name: string, makeStore: () => Promise<TeamStoreHarness>): void {
  describe(`TeamStore and WorkflowRunStore conformance: ${name}`, () => {
    let harness: TeamStoreHarness;
    const reopened: Array<() => Promise<void>> = [];

    beforeEach(async () => {
      harness = await makeStore();
    });

    afterEach(async () => {
      for (const close of reopened.splice(0)) await close();
      await harness.close();
      await harness.cleanup();
    });

    const teams = () => harness.teams;
    const runs = () => harness.runs;

    it("creates teams, gets them by id and by name without case, lists them by name", async () => {
      await teams().create(team("t2", "Zeta Team"));
      await teams().create(team("t1", "alpha team", { modelConfig: { model: "deepseek/deepseek-chat", apiKey: "sk-team" } }));
      expect(await teams().get("t1")).toEqual(team("t1", "alpha team", { modelConfig: { model: "deepseek/deepseek-chat", apiKey: "sk-team" } }));
      expect((await teams().findByName("ALPHA TEAM"))?.id).toBe("t1");
      expect(await teams().findByName("beta")).toBeUndefined();
      expect(await teams().get("missing")).toBeUndefined();
      expect((await teams().list()).map((item) => item.name)).toEqual(["alpha team", "Zeta Team"]);
    });

    it("refuses a second team of the same name (without case) or id, keeping the first", async () => {
      await teams().create(team("t1", "Research"));
      const byName = await teams().create(team("t2", "research")).catch((error: unknown) => error);
      expect(byName).toBeInstanceOf(TeamConflictError);
      expect(byName).toMatchObject({ field: "name" });
      await expect(teams().create(team("t1", "Other"))).rejects.toMatchObject({ field: "id" });
      expect((await teams().list()).map((item) => item.id)).toEqual(["t1"]);
    });

    it("lets one of two simultaneous creates of a name win", async () => {
      const results = await Promise.allSettled([teams().create(team("t1", "Same")), teams().create(team("t2", "same"))]);
      expect(results.filter((result) => result.status === "fulfilled")).toHaveLength(1);
      expect(await teams().list()).toHaveLength(1);
    });

    it("rejects a team it could not read back, naming the problem", async () => {
      const cyclic = team("t1", "Loop", { agents: [{ id: "a", role: "r", task: "t", dependsOn: ["a"] }] });
      await expect(teams().create(cyclic)).rejects.toThrow(/dependency cycle: a → a/);
      expect(await teams().get("t1")).toBeUndefined();
    });

    it("replaces a team, renaming it frees the old name, and refuses a rename onto another team's name", async () => {
      await teams().create(team("t1", "Old"));
      await teams().create(team("t2", "Taken"));
      expect(await teams().replace(team("t1", "New", { updatedAt: START + 1, enabled: false }))).toBe(true);
      expect(await teams().get("t1")).toMatchObject({ name: "New", enabled: false, updatedAt: START + 1 });
      expect(await teams().findByName("old")).toBeUndefined();
      await teams().create(team("t3", "Old"));
      await expect(teams().replace(team("t1", "TAKEN"))).rejects.toMatchObject({ field: "name" });
      expect((await teams().get("t1"))?.name).toBe("New");
      expect(await teams().replace(team("missing", "Whatever"))).toBe(false);
    });

    it("deletes a team and its name", async () => {
      await teams().create(team("t1", "Gone"));
      expect(await teams().delete("t1")).toBe(true);
      expect(await teams().delete("t1")).toBe(false);
      expect(await teams().findByName("gone")).toBeUndefined();
      await teams().create(team("t2", "Gone"));
      expect((await teams().findByName("gone"))?.id).toBe("t2");
    });

    it("creates a run with its nodes and gets it back with every field", async () => {
      const full = run("r1", {
        nodes: [
          node("a", { status: "completed", input: "in", output: "out: ünï \"q\"\nline", model: "openai/x", queuedAt: START, startedAt: START + 1, completedAt: START + 2, attempts: 2, toolCalls: [{ name: "exec", success: true, durationMs: 3, arguments: "{}", result: "ok" }] }),
          node("b.review", { agentId: "b", kind: "review", status: "failed", error: "boom" }),
          node("_synthesis", { agentId: "_synthesis", kind: "synthesis" }),
        ],
        result: "done",
        startedAt: START,
      });
      await runs().create(full);
      expect(await runs().get("r1")).toEqual(full);
      expect(await runs().get("missing")).toBeUndefined();
      await expect(runs().create(run("r1"))).rejects.toThrow(/exists/);
    });

    it("updates a node only from the statuses it names, and returns the whole run", async () => {
      await runs().create(run("r1"));
      const started = await runs().updateNode("r1", "a", { status: "running", startedAt: START + 5, attempts: 1 }, { from: ["pending", "queued"] });
      expect(started?.nodes.map((item) => item.status)).toEqual(["running", "pending", "pending"]);
      expect(started?.nodes[0]).toMatchObject({ startedAt: START + 5, attempts: 1 });
      expect(await runs().updateNode("r1", "a", { status: "running" }, { from: ["pending"] })).toBeUndefined();
      expect(await runs().updateNode("r1", "nope", { status: "running" })).toBeUndefined();
      expect(await runs().updateNode("missing", "a", { status: "running" })).toBeUndefined();
      const done = await runs().updateNode("r1", "a", { status: "completed", output: "result" }, { from: ["running"] });
      expect(done?.nodes[0]).toMatchObject({ status: "completed", output: "result", startedAt: START + 5 });
    });

    it("refuses a node update when the run's status is not allowed", async () => {
      await runs().create(run("r1", { status: "cancelled" }));
      expect(await runs().updateNode("r1", "a", { status: "queued" }, { runFrom: ["pending", "running"] })).toBeUndefined();
      expect((await runs().get("r1"))?.nodes[0]?.status).toBe("pending");
    });

    it("holds the per-run cap on queued and running nodes, also when starts race", async () => {
      await runs().create(run("r1", { nodes: [node("a"), node("b"), node("c"), node("d")] }));
      const results = await Promise.all(["a", "b", "c", "d"].map((id) => runs().updateNode("r1", id, { status: "queued" }, { from: ["pending"], maxActive: 2 })));
      expect(results.filter(Boolean)).toHaveLength(2);
      const after = await runs().get("r1");
      expect(after?.nodes.filter((item) => item.status === "queued")).toHaveLength(2);
      // A node that is itself active does not count against its own update.
      const queued = after!.nodes.find((item) => item.status === "queued")!;
      expect(await runs().updateNode("r1", queued.id, { status: "running" }, { maxActive: 2 })).toBeDefined();
    });

    it("sees every finish of simultaneous node updates in the last one's answer", async () => {
      await runs().create(run("r1", { nodes: [node("a", { status: "running" }), node("b", { status: "running" }), node("c", { status: "running" })] }));
      const answers = await Promise.all(["a", "b", "c"].map((id) => runs().updateNode("r1", id, { status: "completed", output: id }, { from: ["running"] })));
      const sawAll = answers.filter((answer) => answer?.nodes.every((item) => item.status === "completed"));
      expect(sawAll.length).toBeGreaterThanOrEqual(1);
    });

    it("updates a run as a compare-and-set on its status", async () => {
      await runs().create(run("r1", { status: "pending" }));
      expect((await runs().updateRun("r1", { status: "running", startedAt: START + 1 }, ["pending"]))?.status).toBe("running");
      expect(await runs().updateRun("r1", { status: "running" }, ["pending"])).toBeUndefined();
      const ended = await runs().updateRun("r1", { status: "cancelled", completedAt: START + 2 }, ["pending", "running"]);
      expect(ended).toMatchObject({ status: "cancelled", startedAt: START + 1, completedAt: START + 2 });
      expect(await runs().updateRun("r1", { status: "completed" }, ["running"])).toBeUndefined();
      expect(await runs().updateRun("missing", { status: "completed" })).toBeUndefined();
      await expect(runs().updateRun("r1", { status: "weird" as never })).rejects.toThrow(/invalid workflow run update/);
    });

    it("lists runs newest first, filtered by team, session and status", async () => {
      await runs().create(run("r1", { createdAt: START + 1 }));
      await runs().create(run("r2", { createdAt: START + 2, sessionKey: "web:9" }));
      await runs().create(run("r3", { createdAt: START + 3, teamId: "t2", status: "pending" }));
      await runs().updateRun("r1", { status: "completed" });
      expect((await runs().list()).map((item) => item.id)).toEqual(["r3", "r2", "r1"]);
      expect((await runs().list({ limit: 2 })).map((item) => item.id)).toEqual(["r3", "r2"]);
      expect((await runs().list({ sessionKey: "telegram:1" })).map((item) => item.id)).toEqual(["r3", "r1"]);
      expect((await runs().list({ teamId: "t1" })).map((item) => item.id)).toEqual(["r2", "r1"]);
      expect((await runs().list({ status: "completed" })).map((item) => item.id)).toEqual(["r1"]);
      expect((await runs().list({ status: "running" })).map((item) => item.id)).toEqual(["r2"]);
      expect((await runs().list({ teamId: "t1", status: "running", sessionKey: "web:9" })).map((item) => item.id)).toEqual(["r2"]);
    });

    it("deletes a run", async () => {
      await runs().create(run("r1"));
      expect(await runs().delete("r1")).toBe(true);
      expect(await runs().delete("r1")).toBe(false);
      expect(await runs().get("r1")).toBeUndefined();
      expect(await runs().list()).toEqual([]);
    });

    it("cleans up finished runs that ended before a time, from every listing, and keeps the rest", async () => {
      const before = START + 10_000;
      await runs().create(run("old-done", { status: "completed", createdAt: START + 1, completedAt: START + 5_000 }));
      await runs().create(run("old-failed", { status: "failed", createdAt: START + 2, completedAt: START + 6_000, sessionKey: "web:9" }));
      // Ended before `before` by its creation time: no completedAt was ever stamped.
      await runs().create(run("old-cancelled", { status: "cancelled", createdAt: START + 3 }));
      await runs().create(run("ended-late", { status: "completed", createdAt: START + 4, completedAt: before + 1 }));
      await runs().create(run("still-running", { createdAt: START + 5 }));
      await runs().create(run("new-done", { status: "completed", createdAt: before + 2, completedAt: before + 3 }));

      expect(await runs().cleanup(before)).toBe(3);
      expect(await runs().cleanup(before)).toBe(0);
      expect((await runs().list()).map((item) => item.id)).toEqual(["new-done", "still-running", "ended-late"]);
      expect((await runs().list({ sessionKey: "web:9" })).map((item) => item.id)).toEqual([]);
      expect((await runs().list({ status: "completed" })).map((item) => item.id)).toEqual(["new-done", "ended-late"]);
      expect(await runs().get("old-done")).toBeUndefined();
      // A run that finishes after the listing: it goes at the next cleanup, never while it runs.
      await runs().updateRun("still-running", { status: "completed", completedAt: START + 7_000 });
      expect(await runs().cleanup(before)).toBe(1);
      expect((await runs().list()).map((item) => item.id)).toEqual(["new-done", "ended-late"]);
    });

    it("keeps teams and runs across a restart", async () => {
      await teams().create(team("t1", "Durable"));
      await runs().create(run("r1"));
      await runs().updateNode("r1", "b", { status: "completed", output: "kept" });
      await harness.close();
      const store = await harness.reopen();
      reopened.push(store.close);
      expect((await store.teams.findByName("durable"))?.id).toBe("t1");
      expect((await store.runs.get("r1"))?.nodes[1]).toMatchObject({ status: "completed", output: "kept" });
    });
  });
}
