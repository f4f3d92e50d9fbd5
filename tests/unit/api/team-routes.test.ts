/**
 * The agent-teams and workflow-runs APIs through a real listening server, over the file store, a
 * team catalog with one config-file team, and the workflow engine on the in-process queue.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type ApiServer, createApiServer } from "../../../src/api/server.js";
import { registerTeamRoutes } from "../../../src/api/team-routes.js";
import { registerWorkflowRunRoutes } from "../../../src/api/workflow-run-routes.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import { TeamConfigEntrySchema } from "../../../src/config/team.js";
import { type TeamCatalog, createTeamCatalog } from "../../../src/jobs/workflows/team-catalog.js";
import { createFileTeamStore } from "../../../src/store/file-teams.js";
import { type WorkflowHarness, workflowHarness } from "../jobs/workflow-harness.js";

const TOKEN = "test-token-0123456789";
const SECRET = "sk-team-secret-0123456789";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Started {
  url: string;
  catalog: TeamCatalog;
  workflows: WorkflowHarness;
  call(route: string, method?: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> & Array<Record<string, unknown>> }>;
}

async function start(): Promise<Started> {
  const workflows = await workflowHarness({ respond: (call) => (call.role === "hang" ? { hang: true } : { text: `${call.role} output` }) });
  cleanups.push(() => workflows.close());
  const directory = await mkdtemp(path.join(tmpdir(), "countbot-team-routes-"));
  cleanups.push(() => rm(directory, { recursive: true, force: true }));
  const store = createFileTeamStore({ file: path.join(directory, "teams.json") });
  cleanups.push(() => store.close());
  const declared = TeamConfigEntrySchema.parse({ mode: "pipeline", agents: [{ id: "only", role: "Only", task: "t" }] });
  const catalog = createTeamCatalog({ store, teams: { "Config Team": declared }, now: () => 0 });
  let ids = 0;
  const bus = createMemoryBus();
  cleanups.push(() => bus.close());
  const server: ApiServer = createApiServer({
    bus,
    config: { host: "127.0.0.1", port: 0, token: TOKEN },
    logger: pino({ level: "silent" }),
    readiness: async () => ({ ready: true, checks: {} }),
    routes: [
      (scope) => {
        registerTeamRoutes(scope, { teams: catalog, now: () => Date.UTC(2026, 0, 1), newId: () => `team-${++ids}` });
        registerWorkflowRunRoutes(scope, { workflows: workflows.engine, teams: catalog });
      },
    ],
  });
  cleanups.push(() => server.close());
  const { url } = await server.listen();
  return {
    url,
    catalog,
    workflows,
    async call(route, method = "GET", body) {
      const response = await fetch(`${url}${route}`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as never };
    },
  };
}

const graph = {
  name: "Project Analysis",
  description: "three analysts and an integrator",
  mode: "graph",
  agents: [
    { id: "frontend", role: "Frontend analyst", task: "front" },
    { id: "backend", role: "Backend analyst", task: "back" },
    { id: "integrator", role: "Architect", task: "combine", dependsOn: ["frontend", "backend"] },
  ],
};

describe("/api/agent-teams", () => {
  it("creates a team, lists it beside the config file's, and gets it by id", async () => {
    const api = await start();
    const created = await api.call("/api/agent-teams", "POST", graph);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: "team-1", name: "Project Analysis", mode: "graph", enabled: true, source: "api", hasModelConfig: false, createdAt: "2026-01-01T00:00:00.000Z" });
    expect((created.body.agents as Array<Record<string, unknown>>)[2]).toEqual({ id: "integrator", role: "Architect", task: "combine", dependsOn: ["frontend", "backend"] });
    const list = await api.call("/api/agent-teams");
    expect(list.body.map((team) => [team.name, team.source])).toEqual([
      ["Config Team", "config"],
      ["Project Analysis", "api"],
    ]);
    expect((await api.call("/api/agent-teams/team-1")).body.name).toBe("Project Analysis");
    expect((await api.call("/api/agent-teams/nope")).status).toBe(404);
  });

  it("refuses a cycle at creation with an error naming it, and other bad fields by name", async () => {
    const api = await start();
    const cyclic = { ...graph, agents: [{ id: "a", role: "A", task: "a", dependsOn: ["b"] }, { id: "b", role: "B", task: "b", dependsOn: ["a"] }] };
    expect(await api.call("/api/agent-teams", "POST", cyclic)).toEqual({ status: 400, body: { error: "agents[0].dependsOn: dependency cycle: a → b → a; a graph must not loop back" } });
    expect((await api.call("/api/agent-teams", "POST", { ...graph, mode: "swarm" })).body.error).toMatch(/^mode: expected one of "pipeline", "graph", "council"/);
    expect((await api.call("/api/agent-teams", "POST", { ...graph, agents: [{ id: "a", role: "A", task: "a", dependsOn: ["ghost"] }] })).body.error).toBe('agents[0].dependsOn[0]: unknown agent "ghost": no agent of this team has that id');
    expect((await api.call("/api/agent-teams")).body).toHaveLength(1);
  });

  it("answers 409 for a name that is taken, compared without case, the config file's included", async () => {
    const api = await start();
    await api.call("/api/agent-teams", "POST", graph);
    const again = await api.call("/api/agent-teams", "POST", { ...graph, name: "project analysis" });
    expect(again).toEqual({ status: 409, body: { error: 'name: a team named "Project Analysis" exists already (id team-1); team names are compared without case' } });
    expect((await api.call("/api/agent-teams", "POST", { ...graph, name: "CONFIG TEAM" })).status).toBe(409);
  });

  it("replaces and deletes an API team, and refuses both for a config-file team", async () => {
    const api = await start();
    await api.call("/api/agent-teams", "POST", graph);
    const replaced = await api.call("/api/agent-teams/team-1", "PUT", { ...graph, name: "Renamed", enabled: false });
    expect(replaced.body).toMatchObject({ id: "team-1", name: "Renamed", enabled: false });
    expect((await api.call("/api/agent-teams/team-1", "PUT", { ...graph, name: "Config Team" })).status).toBe(409);
    const declared = (await api.call("/api/agent-teams")).body.find((team) => team.source === "config")!;
    const refused = await api.call(`/api/agent-teams/${String(declared.id)}`, "DELETE");
    expect(refused.status).toBe(409);
    expect(refused.body.error).toContain("declared in the config file");
    expect((await api.call("/api/agent-teams/team-1", "DELETE")).body).toEqual({ id: "team-1", deleted: true });
    expect((await api.call("/api/agent-teams/team-1")).status).toBe(404);
  });

  it("keeps the team's model settings behind /config, the key masked, a masked key sent back kept", async () => {
    const api = await start();
    await api.call("/api/agent-teams", "POST", graph);
    const put = await api.call("/api/agent-teams/team-1/config", "PUT", { model: "deepseek/deepseek-chat", apiKey: SECRET, temperature: 0.2 });
    expect(put.body).toEqual({ id: "team-1", modelConfig: { model: "deepseek/deepseek-chat", apiKey: "****6789", temperature: 0.2 } });
    expect((await api.call("/api/agent-teams/team-1/config")).body).toEqual(put.body);
    for (const route of ["/api/agent-teams", "/api/agent-teams/team-1", "/api/agent-teams/team-1/config"]) expect(JSON.stringify((await api.call(route)).body)).not.toContain(SECRET);
    expect((await api.call("/api/agent-teams/team-1")).body.hasModelConfig).toBe(true);
    // A form that shows the masked key and sends it back changes the model, not the key.
    await api.call("/api/agent-teams/team-1/config", "PUT", { model: "deepseek/deepseek-reasoner", apiKey: "****6789" });
    expect((await api.catalog.get("team-1"))?.modelConfig).toEqual({ model: "deepseek/deepseek-reasoner", apiKey: SECRET });
    // Replacing the definition leaves the model settings alone.
    await api.call("/api/agent-teams/team-1", "PUT", { ...graph, description: "new" });
    expect((await api.catalog.get("team-1"))?.modelConfig?.apiKey).toBe(SECRET);
    expect((await api.call("/api/agent-teams/team-1/config", "PUT", { temperature: 5 })).body.error).toMatch(/^temperature: expected/);
    expect((await api.call("/api/agent-teams/team-1/config", "DELETE")).body).toEqual({ id: "team-1", modelConfig: {} });
    expect((await api.catalog.get("team-1"))?.modelConfig).toBeUndefined();
  });
});

describe("/api/workflow-runs", () => {
  it("lists runs filtered by team, chat and status, shows one with its nodes, and cancels one", async () => {
    const api = await start();
    await api.call("/api/agent-teams", "POST", graph);
    await api.call("/api/agent-teams", "POST", { name: "Hanger", mode: "graph", agents: [{ id: "h", role: "hang", task: "never ends" }] });
    const analysis = (await api.catalog.findByName("Project Analysis"))!;
    const hanger = (await api.catalog.findByName("Hanger"))!;
    const done = await api.workflows.engine.start({ team: analysis, goal: "review", sessionKey: "telegram:1" });
    await api.workflows.ended(done.id);
    const hanging = await api.workflows.engine.start({ team: hanger, goal: "wait", sessionKey: "web:2" });
    await vi.waitFor(async () => expect((await api.workflows.runs.get(hanging.id))?.nodes[0]?.status).toBe("running"));

    expect((await api.call("/api/workflow-runs")).body.map((run) => run.id)).toEqual([hanging.id, done.id]);
    expect((await api.call("/api/workflow-runs?team=project%20analysis")).body.map((run) => run.id)).toEqual([done.id]);
    expect((await api.call(`/api/workflow-runs?team=${hanger.id}&status=running`)).body.map((run) => run.id)).toEqual([hanging.id]);
    expect((await api.call("/api/workflow-runs?chat=telegram:1&status=completed")).body.map((run) => run.id)).toEqual([done.id]);
    expect((await api.call("/api/workflow-runs?status=weird")).body.error).toMatch(/^status: expected one of/);
    expect((await api.call("/api/workflow-runs?team=nobody")).status).toBe(404);

    const detail = (await api.call(`/api/workflow-runs/${done.id}`)).body;
    expect(detail).toMatchObject({ id: done.id, teamName: "Project Analysis", mode: "graph", goal: "review", chat: "telegram:1", status: "completed", result: "Architect output" });
    const nodes = detail.nodes as unknown as Array<Record<string, unknown>>;
    expect(nodes.map((node) => [node.id, node.status, node.output])).toEqual([
      ["frontend", "completed", "Frontend analyst output"],
      ["backend", "completed", "Backend analyst output"],
      ["integrator", "completed", "Architect output"],
    ]);
    expect(String(nodes[2]!.input)).toContain("Frontend analyst output");

    const cancelled = await api.call(`/api/workflow-runs/${hanging.id}/cancel`, "POST");
    expect(cancelled.body).toMatchObject({ id: hanging.id, status: "cancelled" });
    expect((await api.call(`/api/workflow-runs/${hanging.id}/cancel`, "POST")).status).toBe(409);
    expect((await api.call(`/api/workflow-runs/${done.id}/cancel`, "POST")).body).toMatchObject({ status: "completed", error: expect.stringContaining("has already completed") });
    expect((await api.call("/api/workflow-runs/missing")).status).toBe(404);
  });

  it("starts a run of a team named by id or name, its chat optional, and says why one cannot start", async () => {
    const api = await start();
    await api.call("/api/agent-teams", "POST", graph);
    const started = await api.call("/api/workflow-runs", "POST", { team: "project analysis", goal: "  review the repo ", chat: "web:console-1" });
    expect(started.status).toBe(201);
    expect(started.body).toMatchObject({ teamName: "Project Analysis", goal: "review the repo", chat: "web:console-1", origin: "api", mode: "graph" });
    expect((started.body.nodes as unknown as Array<{ id: string }>).map((node) => node.id)).toEqual(["frontend", "backend", "integrator"]);
    await api.workflows.ended(String(started.body.id));
    expect((await api.call(`/api/workflow-runs/${String(started.body.id)}`)).body).toMatchObject({ status: "completed", result: "Architect output" });

    const byId = await api.call("/api/workflow-runs", "POST", { team: "team-1", goal: "again" });
    expect(byId.body).toMatchObject({ status: expect.any(String), chat: null });

    expect(await api.call("/api/workflow-runs", "POST", { team: "nobody", goal: "x" })).toEqual({ status: 404, body: { error: 'team: no team has the id or name "nobody"' } });
    expect((await api.call("/api/workflow-runs", "POST", { team: "team-1", goal: "   " })).body.error).toBe("goal: expected a goal, not only spaces");
    expect((await api.call("/api/workflow-runs", "POST", { team: "team-1", goal: "x", chat: "no-colon" })).body.error).toMatch(/^chat: expected a session key/);
    expect((await api.call("/api/workflow-runs", "POST", { team: "team-1", goal: "x", teem: 1 })).body.error).toMatch(/^body: unknown field "teem"/);

    await api.call("/api/agent-teams/team-1", "PUT", { ...graph, enabled: false });
    const disabled = await api.call("/api/workflow-runs", "POST", { team: "team-1", goal: "x" });
    expect(disabled.status).toBe(409);
    expect(disabled.body.error).toMatch(/^team "Project Analysis" is disabled\. Enable it/);
  });
});
