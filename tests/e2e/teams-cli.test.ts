/**
 * `countbot teams` and `countbot runs` as child processes, against a file store in a temp
 * COUNTBOT_DATA_DIR (with one team declared in the config file), and `runs cancel` against a small
 * local HTTP server standing in for the running process's API.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { type IncomingHttpHeaders, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createFileStore } from "../../src/store/file-store.js";
import type { WorkflowRun } from "../../src/store/team-record.js";
import { runCli } from "../support/run-cli.js";

const TOKEN = "operator-token-0123456789";
const T0 = Date.UTC(2026, 1, 15, 10, 0, 0);

let root: string;
let dataDir: string;
let configFile: string;
const cleanups: Array<() => Promise<void>> = [];

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-teams-cli-"));
  dataDir = path.join(root, "data");
  configFile = path.join(root, "countbot.json");
  await writeFile(configFile, JSON.stringify({ teams: { Reviewers: { mode: "council", agents: [{ id: "sec", role: "Security", perspective: "security" }, { id: "perf", role: "Performance", perspective: "speed" }] } } }));
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await rm(root, { recursive: true, force: true });
});

function cli(args: string[], env: Record<string, string> = {}) {
  return runCli(args, { env: { HOME: root, COUNTBOT_DATA_DIR: dataDir, COUNTBOT_CONFIG: configFile, ...env }, cwd: root });
}

describe("countbot teams", () => {
  it("creates a team from a file, lists it beside the config file's, shows and deletes it", async () => {
    const file = path.join(root, "analysis.yaml");
    await writeFile(
      file,
      [
        "name: Project Analysis",
        "mode: graph",
        "agents:",
        "  - { id: frontend, role: Frontend analyst, task: analyse the front end }",
        "  - { id: backend, role: Backend analyst, task: analyse the back end, model: openai/gpt-4o }",
        "  - { id: integrator, role: Architect, task: combine, dependsOn: [frontend, backend] }",
      ].join("\n"),
    );
    const created = await cli(["teams", "create", "-f", file]);
    expect(created.stderr).toBe("");
    expect(created.stdout).toMatch(/^created team Project Analysis \(team-[\w-]+\): graph, 3 agents\n$/);

    const listed = await cli(["teams", "list"]);
    const lines = listed.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+MODE\s+AGENTS\s+ENABLED\s+SOURCE\s+ID$/);
    expect(lines.slice(1).map((line) => line.split(/\s{2,}/).slice(0, 5))).toEqual([
      ["Project Analysis", "graph", "3", "yes", "api"],
      ["Reviewers", "council", "2", "yes", "config"],
    ]);

    const shown = await cli(["teams", "show", "project analysis"]);
    expect(shown.stdout).toContain("mode          graph\n");
    expect(shown.stdout).toContain("  integrator  Architect  (after frontend, backend)\n    task: combine\n");
    expect(shown.stdout).toContain("  backend  Backend analyst  (model openai/gpt-4o)\n");

    expect(await cli(["teams", "create", "-f", file])).toMatchObject({ code: 1, stderr: expect.stringMatching(/^countbot: a team named "Project Analysis" exists already/) });
    expect(await cli(["teams", "delete", "Reviewers"])).toMatchObject({ code: 1, stderr: expect.stringContaining("is declared in the config file") });
    expect((await cli(["teams", "delete", "Project Analysis"])).stdout).toMatch(/^deleted team Project Analysis/);
    expect((await cli(["teams", "list"])).stdout).not.toContain("Project Analysis");
  });

  it("refuses a cycle in the file with an error naming it", async () => {
    const file = path.join(root, "loop.json");
    await writeFile(file, JSON.stringify({ name: "Loop", mode: "graph", agents: [{ id: "a", role: "A", task: "a", dependsOn: ["b"] }, { id: "b", role: "B", task: "b", dependsOn: ["a"] }] }));
    expect(await cli(["teams", "create", "-f", file])).toEqual({ code: 1, stdout: "", stderr: `countbot: ${file}: agents[0].dependsOn: dependency cycle: a → b → a; a graph must not loop back\n` });
  });
});

function run(id: string, overrides: Partial<WorkflowRun> = {}): WorkflowRun {
  const team = { id: "team-x", name: "Analysts", description: "", mode: "graph" as const, enabled: true, crossReview: false, maxIterations: 10, nodeTimeoutSeconds: 600, agents: [{ id: "a", role: "A", task: "a", dependsOn: [] }], createdAt: T0, updatedAt: T0 };
  return {
    id,
    teamId: "team-x",
    teamName: "Analysts",
    mode: "graph",
    goal: `goal ${id}`,
    sessionKey: "telegram:42",
    status: "completed",
    team,
    nodes: [{ id: "a", agentId: "a", kind: "agent", status: "completed", output: "A's findings", toolCalls: [], attempts: 1, startedAt: T0, completedAt: T0 + 1_500, model: "openai/gpt-4o-mini" }],
    result: "A's findings",
    createdAt: T0,
    completedAt: T0 + 2_000,
    ...overrides,
  };
}

describe("countbot runs", () => {
  it("lists runs filtered by status and shows one node by node", async () => {
    const store = createFileStore({ dataDir });
    await store.runs.create(run("wf-done"));
    await store.runs.create(run("wf-live", { status: "running", createdAt: T0 + 60_000, sessionKey: "web:1", completedAt: undefined, nodes: [{ id: "a", agentId: "a", kind: "agent", status: "running", toolCalls: [], attempts: 1 }] }));
    await store.close();

    const listed = await cli(["runs", "list"]);
    expect(listed.stdout.split("\n").slice(1, 3).map((line) => line.split(/\s{2,}/))).toEqual([
      ["wf-live", "running", "Analysts", "0/1", "2026-02-15T10:01:00Z", "web:1", "goal wf-live"],
      ["wf-done", "completed", "Analysts", "1/1", "2026-02-15T10:00:00Z", "telegram:42", "goal wf-done"],
    ]);
    expect((await cli(["runs", "list", "--status", "running"])).stdout).not.toContain("wf-done");
    const shown = await cli(["runs", "show", "wf-done"]);
    expect(shown.stdout).toContain("team        Analysts (graph, team-x)\n");
    expect(shown.stdout).toContain("  a  completed  0 tool calls, 1 run, 1500 ms, openai/gpt-4o-mini\n    A's findings\n");
    expect(await cli(["runs", "show", "nope"])).toMatchObject({ code: 1, stderr: "countbot: workflow run nope not found; `countbot runs list` shows the runs\n" });
  });

  it("cancels through the running process's API with the bearer token", async () => {
    const requests: Array<{ method: string; path: string; headers: IncomingHttpHeaders }> = [];
    const server = createServer((request, response) => {
      requests.push({ method: request.method ?? "", path: request.url ?? "", headers: request.headers });
      request.resume();
      request.on("end", () => {
        const finished = request.url?.includes("wf-done");
        response.writeHead(finished ? 409 : 200, { "content-type": "application/json" });
        response.end(JSON.stringify(finished ? { error: "workflow run wf-done has already completed" } : { id: "wf-live", teamName: "Analysts", status: "cancelled" }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const env = { COUNTBOT_API_HOST: "127.0.0.1", COUNTBOT_API_PORT: String((server.address() as AddressInfo).port), COUNTBOT_API_TOKEN: TOKEN };

    expect(await cli(["runs", "cancel", "wf-live"], env)).toEqual({ code: 0, stdout: "cancelled run wf-live (Analysts)\n", stderr: "" });
    expect(requests[0]).toMatchObject({ method: "POST", path: "/api/workflow-runs/wf-live/cancel", headers: { authorization: `Bearer ${TOKEN}` } });
    expect(await cli(["runs", "cancel", "wf-done"], env)).toEqual({ code: 1, stdout: "", stderr: "countbot: workflow run wf-done has already completed\n" });
  });

  it("cancels with the token the running process generated in the data directory when none is configured", async () => {
    const authorizations: Array<string | undefined> = [];
    const server = createServer((request, response) => {
      authorizations.push(request.headers.authorization);
      request.resume();
      request.on("end", () => {
        const allowed = request.headers.authorization === `Bearer ${TOKEN}`;
        response.writeHead(allowed ? 200 : 401, { "content-type": "application/json" });
        response.end(JSON.stringify(allowed ? { id: "wf-live", teamName: "Analysts", status: "cancelled" } : { error: "missing or wrong bearer token" }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    // What `countbot start` leaves behind when no api.token is configured.
    await mkdir(dataDir, { recursive: true });
    await writeFile(path.join(dataDir, "api-token"), `${TOKEN}\n`, { mode: 0o600 });
    const env = { COUNTBOT_API_HOST: "127.0.0.1", COUNTBOT_API_PORT: String((server.address() as AddressInfo).port) };

    expect(await cli(["runs", "cancel", "wf-live"], env)).toEqual({ code: 0, stdout: "cancelled run wf-live (Analysts)\n", stderr: "" });
    expect(authorizations).toEqual([`Bearer ${TOKEN}`]);
  });
});
