/**
 * `countbot tasks` as a child process: `list` and `show` against a file store prepared in a temp
 * COUNTBOT_DATA_DIR, `cancel` against a small local HTTP server standing in for the running
 * process's API, and against nothing at all.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { type IncomingHttpHeaders, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { SubagentTask } from "../../src/store/task-record.js";
import { createFileStore } from "../../src/store/file-store.js";
import { runCli } from "../support/run-cli.js";

const TOKEN = "operator-token-0123456789";
const T0 = Date.UTC(2026, 1, 15, 10, 0, 0);

let root: string;
let dataDir: string;

const cleanups: Array<() => Promise<void>> = [];
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-tasks-cli-"));
  dataDir = path.join(root, "data");
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await rm(root, { recursive: true, force: true });
});

/** Runs `countbot tasks ...` from the temp dir, so no project config file is picked up. */
function tasks(args: string[], env: Record<string, string> = {}) {
  return runCli(["tasks", ...args], { env: { HOME: root, COUNTBOT_DATA_DIR: dataDir, ...env }, cwd: root });
}

function task(id: string, overrides: Partial<SubagentTask> = {}): SubagentTask {
  return {
    id,
    label: `label ${id}`,
    task: `do ${id}`,
    sessionKey: "telegram:42",
    status: "pending",
    progress: 0,
    toolCalls: [],
    createdAt: T0,
    attempts: 0,
    ...overrides,
  };
}

/** Writes tasks into the data dir, as the running bot would. */
async function writeTasks(entries: SubagentTask[]): Promise<void> {
  const store = createFileStore({ dataDir });
  try {
    for (const entry of entries) await store.tasks.create(entry);
  } finally {
    await store.close();
  }
}

describe("countbot tasks list and show (file store)", () => {
  const seed = [
    task("t-done", { status: "completed", progress: 100, label: "Code analysis", result: "Report:\n3 modules", startedAt: T0 + 1_000, completedAt: T0 + 30_000, attempts: 1 }),
    task("t-run", {
      status: "running",
      progress: 45,
      createdAt: T0 + 60_000,
      startedAt: T0 + 61_000,
      attempts: 1,
      toolCalls: [{ name: "exec", success: true, durationMs: 812, arguments: '{"command":"npm test"}', result: "ok" }],
    }),
    task("t-web", { status: "failed", error: "model unreachable", sessionKey: "web:abc", createdAt: T0 + 120_000, completedAt: T0 + 125_000 }),
  ];

  it("lists tasks newest first as a table, filtered by session and status", async () => {
    await writeTasks(seed);
    const all = await tasks(["list"]);
    expect(all.stderr).toBe("");
    expect(all.code).toBe(0);
    expect(all.stdout).toBe(
      [
        "ID      STATUS     PROGRESS  CREATED               SESSION      LABEL",
        "t-web   failed     0%        2026-02-15T10:02:00Z  web:abc      label t-web",
        "t-run   running    45%       2026-02-15T10:01:00Z  telegram:42  label t-run",
        "t-done  completed  100%      2026-02-15T10:00:00Z  telegram:42  Code analysis",
        "",
      ].join("\n"),
    );

    const running = await tasks(["list", "--status", "running"]);
    expect(running.stdout.split("\n").slice(1, -1)).toEqual(["t-run  running  45%       2026-02-15T10:01:00Z  telegram:42  label t-run"]);
    const web = await tasks(["list", "--session", "web:abc"]);
    expect(web.stdout).toContain("t-web");
    expect(web.stdout).not.toContain("t-run");
    const limited = await tasks(["list", "--limit", "1"]);
    expect(limited.stdout).toContain("(the newest 1; --limit N shows more)");
    expect(await tasks(["list", "--status", "cancelled"])).toMatchObject({ code: 0, stdout: "no tasks\n" });
  });

  it("shows one task as a block, and refuses an unknown id", async () => {
    await writeTasks(seed);
    const shown = await tasks(["show", "t-done"]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toBe(
      [
        "id          t-done",
        "label       Code analysis",
        "status      completed (100%)",
        "session     telegram:42",
        "created     2026-02-15T10:00:00Z",
        "started     2026-02-15T10:00:01Z",
        "completed   2026-02-15T10:00:30Z",
        "attempts    1",
        "task:",
        "  do t-done",
        "result:",
        "  Report:",
        "  3 modules",
        "tool calls (0):",
        "",
      ].join("\n"),
    );
    expect((await tasks(["show", "t-run"])).stdout).toContain('tool calls (1):\n  exec  ok  812 ms  {"command":"npm test"}\n');

    const unknown = await tasks(["show", "nope"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toBe("countbot: task nope not found; `countbot tasks list` shows the tasks\n");
  });
});

interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
}

/** Stands in for the running process's API: answers every request with `answer`, records it. */
async function startFakeApi(answer: { status: number; body: unknown }): Promise<{ port: number; requests: RecordedRequest[] }> {
  const requests: RecordedRequest[] = [];
  const server = createServer((request, response) => {
    requests.push({ method: request.method ?? "", path: request.url ?? "", headers: request.headers });
    request.resume();
    request.on("end", () => {
      response.writeHead(answer.status, { "content-type": "application/json" });
      response.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port, requests };
}

function apiEnv(port: number): Record<string, string> {
  return { COUNTBOT_API_HOST: "127.0.0.1", COUNTBOT_API_PORT: String(port), COUNTBOT_API_TOKEN: TOKEN };
}

describe("countbot tasks cancel (through the API)", () => {
  it("posts to the cancel route with the bearer token", async () => {
    const api = await startFakeApi({ status: 200, body: { task_id: "t-run", label: "Code analysis", status: "cancelled" } });
    const result = await tasks(["cancel", "t-run"], apiEnv(api.port));
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toBe("cancelled task t-run (Code analysis)\n");
    expect(api.requests).toHaveLength(1);
    expect(api.requests[0]).toMatchObject({ method: "POST", path: "/api/tasks/t-run/cancel" });
    expect(api.requests[0]!.headers.authorization).toBe(`Bearer ${TOKEN}`);
  });

  it("says so when the task has already finished or is unknown", async () => {
    const finished = await startFakeApi({ status: 409, body: { error: "task t-done has already completed", task_id: "t-done", status: "completed" } });
    expect(await tasks(["cancel", "t-done"], apiEnv(finished.port))).toEqual({ code: 1, stdout: "", stderr: "countbot: task t-done has already completed\n" });

    const unknown = await startFakeApi({ status: 404, body: { error: "task nope not found" } });
    expect(await tasks(["cancel", "nope"], apiEnv(unknown.port))).toEqual({ code: 1, stdout: "", stderr: "countbot: task nope not found\n" });
  });

  it("explains a refused token without printing it", async () => {
    const api = await startFakeApi({ status: 401, body: { error: "missing or wrong bearer token" } });
    const result = await tasks(["cancel", "t-run"], apiEnv(api.port));
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `countbot: the API at http://127.0.0.1:${api.port}/api/tasks/t-run/cancel refused the token (401): set api.token or COUNTBOT_API_TOKEN to the running process's token\n`,
    );
    expect(result.stderr).not.toContain(TOKEN);
  });

  it("fails with one line naming the URL when nothing listens", async () => {
    // A port that was just free: bind it, note it, release it.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));

    const result = await tasks(["cancel", "t-run"], apiEnv(port));
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr.split("\n")).toHaveLength(2);
    expect(result.stderr).toMatch(new RegExp(`^countbot: no countbot process answers at http://127\\.0\\.0\\.1:${port}/api/tasks/t-run/cancel \\(ECONNREFUSED\\): `));
  });
});

describe("countbot tasks usage", () => {
  it("exits 2 with the usage on wrong arguments", async () => {
    const cases: Array<[string[], string]> = [
      [["show"], "countbot: missing required argument 'id'\n"],
      [["cancel", "a", "b"], "countbot: too many arguments for 'cancel'. Expected 1 argument but got 2: a, b.\n"],
      [["shwo", "t-1"], "countbot: unknown command 'shwo' (did you mean show?)\n"],
      [["list", "extra"], "countbot: too many arguments for 'list'. Expected 0 arguments but got 1: extra.\n"],
    ];
    const results = await Promise.all(cases.map(([args]) => tasks(args)));
    results.forEach((result, index) => {
      expect(result.code).toBe(2);
      expect(result.stderr).toBe(cases[index]![1]);
    });
    const none = await tasks([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("Usage: countbot tasks [options] [command]");
  });

  it("exits 2 naming the allowed statuses", async () => {
    const result = await tasks(["list", "--status", "done"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe("countbot: option '--status <status>' argument 'done' is invalid. Allowed choices are pending, running, completed, failed, cancelled.\n");
  });
});
