/**
 * The tasks API through a real listening server (createApiServer with the `routes` option), over an
 * in-memory TaskStore fake that keeps the contract: newest first, compare-and-set updates.
 */
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { type ApiServer, createApiServer } from "../../../src/api/server.js";
import { registerTaskRoutes } from "../../../src/api/task-routes.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import { FINISHED_STATUSES, type SubagentTask, type TaskStats, type TaskStatus } from "../../../src/store/task-record.js";
import type { TaskStore } from "../../../src/store/store.js";

const TOKEN = "test-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };
const T0 = Date.UTC(2026, 1, 15, 10, 0, 0);

/** In-memory TaskStore: the contract, nothing more. */
function createFakeTaskStore(): TaskStore {
  const tasks = new Map<string, SubagentTask>();
  return {
    async create(task) {
      tasks.set(task.id, structuredClone(task));
    },
    async get(id) {
      const task = tasks.get(id);
      return task && structuredClone(task);
    },
    async update(id, patch, from) {
      const task = tasks.get(id);
      if (!task || (from && !from.includes(task.status))) return undefined;
      const updated = { ...task, ...patch };
      tasks.set(id, updated);
      return structuredClone(updated);
    },
    async list(filter = {}) {
      const found = [...tasks.values()]
        .filter((task) => (filter.status === undefined || task.status === filter.status) && (filter.sessionKey === undefined || task.sessionKey === filter.sessionKey))
        .sort((a, b) => b.createdAt - a.createdAt);
      return structuredClone(filter.limit === undefined ? found : found.slice(0, filter.limit));
    },
    async delete(id) {
      return tasks.delete(id);
    },
    async stats() {
      const stats: TaskStats = { total: tasks.size, pending: 0, running: 0, completed: 0, failed: 0, cancelled: 0 };
      for (const task of tasks.values()) stats[task.status] += 1;
      return stats;
    },
    async cleanup(before) {
      let removed = 0;
      for (const task of tasks.values()) {
        if (FINISHED_STATUSES.has(task.status) && (task.completedAt ?? Infinity) < before && tasks.delete(task.id)) removed += 1;
      }
      return removed;
    },
  };
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

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Started {
  url: string;
  tasks: TaskStore;
  cancelled: string[];
}

/** A server whose `cancel` marks the task cancelled in the store, as the SubagentManager would. */
async function start(seed: SubagentTask[], options: { cancel?: (id: string, tasks: TaskStore) => Promise<SubagentTask | undefined> } = {}): Promise<Started> {
  const tasks = createFakeTaskStore();
  for (const entry of seed) await tasks.create(entry);
  const cancelled: string[] = [];
  const cancel =
    options.cancel ??
    ((id: string, store: TaskStore) => store.update(id, { status: "cancelled", error: "cancelled by the operator", completedAt: T0 + 60_000 }, ["pending", "running"]));
  const bus = createMemoryBus();
  cleanups.push(() => bus.close());
  const server: ApiServer = createApiServer({
    bus,
    config: { host: "127.0.0.1", port: 0, token: TOKEN },
    logger: pino({ level: "silent" }),
    readiness: async () => ({ ready: true, checks: {} }),
    routes: [
      (scope) =>
      registerTaskRoutes(scope, {
        tasks,
        cancel: async (id) => {
          cancelled.push(id);
          return cancel(id, tasks);
        },
      }),
    ],
  });
  cleanups.push(() => server.close());
  const { url } = await server.listen();
  return { url, tasks, cancelled };
}

async function call(url: string, method = "GET", headers: Record<string, string> = auth): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, { method, headers });
  return { status: response.status, body: await response.json() };
}

const seed = [
  task("t-old", { status: "completed", progress: 100, result: "report written", createdAt: T0, startedAt: T0 + 1_000, completedAt: T0 + 30_000 }),
  task("t-run", { status: "running", progress: 45, createdAt: T0 + 60_000, startedAt: T0 + 61_000, attempts: 1 }),
  task("t-web", { status: "failed", error: "model unreachable", sessionKey: "web:abc", createdAt: T0 + 120_000, completedAt: T0 + 125_000 }),
  task("t-new", { status: "pending", createdAt: T0 + 180_000 }),
];

describe("GET /api/tasks", () => {
  it("lists newest first in the seed's shape, without tool calls", async () => {
    const { url } = await start(seed);
    const { status, body } = await call(`${url}/api/tasks`);
    expect(status).toBe(200);
    const list = body as Array<Record<string, unknown>>;
    expect(list.map((entry) => entry.task_id)).toEqual(["t-new", "t-web", "t-run", "t-old"]);
    expect(list[3]).toEqual({
      task_id: "t-old",
      label: "label t-old",
      message: "do t-old",
      session_id: "telegram:42",
      status: "completed",
      progress: 100,
      result: "report written",
      error: null,
      created_at: "2026-02-15T10:00:00.000Z",
      started_at: "2026-02-15T10:00:01.000Z",
      completed_at: "2026-02-15T10:00:30.000Z",
    });
    expect(list[0]).toMatchObject({ status: "pending", started_at: null, completed_at: null, result: null });
    expect(list.every((entry) => !("tool_calls" in entry))).toBe(true);
  });

  it("filters by session, status and limit", async () => {
    const { url } = await start(seed);
    const ids = async (query: string) => ((await call(`${url}/api/tasks?${query}`)).body as Array<{ task_id: string }>).map((entry) => entry.task_id);
    expect(await ids("session_id=web:abc")).toEqual(["t-web"]);
    expect(await ids("status=running")).toEqual(["t-run"]);
    expect(await ids("session_id=telegram:42&status=completed")).toEqual(["t-old"]);
    expect(await ids("limit=2")).toEqual(["t-new", "t-web"]);
    expect(await ids("session_id=&status=")).toHaveLength(4);
    expect(await ids("session_id=nobody")).toEqual([]);
  });

  it("answers 400 naming the field of a bad query", async () => {
    const { url } = await start(seed);
    expect(await call(`${url}/api/tasks?status=done`)).toEqual({
      status: 400,
      body: { error: 'status: expected one of "pending", "running", "completed", "failed", "cancelled", got "done"' },
    });
    expect(await call(`${url}/api/tasks?limit=0`)).toEqual({ status: 400, body: { error: "limit: expected a number >= 1, got 0" } });
    expect(await call(`${url}/api/tasks?limit=many`)).toEqual({ status: 400, body: { error: 'limit: expected a whole number, got "many"' } });
    const typo = await call(`${url}/api/tasks?state=running`);
    expect(typo).toEqual({ status: 400, body: { error: 'query: unknown field "state" (did you mean "status"?)' } });
  });
});

describe("GET /api/tasks/stats", () => {
  it("counts tasks by status", async () => {
    const { url } = await start(seed);
    expect(await call(`${url}/api/tasks/stats`)).toEqual({
      status: 200,
      body: { total: 4, pending: 1, running: 1, completed: 1, failed: 1, cancelled: 0 },
    });
  });
});

describe("GET /api/tasks/:id", () => {
  it("answers one task with its tool calls and attempts", async () => {
    const toolCalls = [{ name: "read_file", success: true, durationMs: 12, arguments: '{"path":"a.md"}', result: "# A" }];
    const { url } = await start([task("t-1", { status: "running", progress: 5, toolCalls, startedAt: T0 + 500, attempts: 2 })]);
    const { status, body } = await call(`${url}/api/tasks/t-1`);
    expect(status).toBe(200);
    expect(body).toMatchObject({
      task_id: "t-1",
      message: "do t-1",
      status: "running",
      progress: 5,
      attempts: 2,
      started_at: "2026-02-15T10:00:00.500Z",
      tool_calls: [{ name: "read_file", success: true, duration_ms: 12, arguments: '{"path":"a.md"}', result: "# A" }],
    });
  });

  it("answers 404 for an unknown task", async () => {
    const { url } = await start(seed);
    expect(await call(`${url}/api/tasks/nope`)).toEqual({ status: 404, body: { error: "task nope not found" } });
  });
});

describe("POST /api/tasks/:id/cancel", () => {
  it("cancels a running task through the cancel function", async () => {
    const { url, cancelled, tasks } = await start(seed);
    const { status, body } = await call(`${url}/api/tasks/t-run/cancel`, "POST");
    expect(status).toBe(200);
    expect(body).toMatchObject({ task_id: "t-run", status: "cancelled", completed_at: "2026-02-15T10:01:00.000Z" });
    expect(cancelled).toEqual(["t-run"]);
    expect((await tasks.get("t-run"))?.status).toBe("cancelled");
  });

  it("answers 409 with the status for a finished task, without calling cancel", async () => {
    const { url, cancelled } = await start([...seed, task("t-gone", { status: "cancelled" })]);
    expect(await call(`${url}/api/tasks/t-old/cancel`, "POST")).toEqual({
      status: 409,
      body: { error: "task t-old has already completed", task_id: "t-old", status: "completed" },
    });
    expect(await call(`${url}/api/tasks/t-web/cancel`, "POST")).toMatchObject({ status: 409, body: { status: "failed" } });
    expect(await call(`${url}/api/tasks/t-gone/cancel`, "POST")).toMatchObject({
      status: 409,
      body: { error: "task t-gone has already been cancelled", status: "cancelled" },
    });
    expect(cancelled).toEqual([]);
  });

  it("answers 409 when the task finished before the cancel reached it", async () => {
    const { url } = await start(seed, { cancel: (id, tasks) => tasks.update(id, { status: "completed", progress: 100, result: "done" }) });
    expect(await call(`${url}/api/tasks/t-run/cancel`, "POST")).toEqual({
      status: 409,
      body: { error: "task t-run completed before it could be cancelled", task_id: "t-run", status: "completed" },
    });
  });

  it("answers 404 for an unknown task, and when it vanished during the cancel", async () => {
    const { url, cancelled } = await start(seed, { cancel: async () => undefined });
    expect(await call(`${url}/api/tasks/nope/cancel`, "POST")).toEqual({ status: 404, body: { error: "task nope not found" } });
    expect(cancelled).toEqual([]);
    expect(await call(`${url}/api/tasks/t-new/cancel`, "POST")).toEqual({ status: 404, body: { error: "task t-new not found" } });
    expect(cancelled).toEqual(["t-new"]);
  });
});

describe("DELETE /api/tasks/:id", () => {
  it("deletes a finished task", async () => {
    const { url, tasks } = await start(seed);
    expect(await call(`${url}/api/tasks/t-old`, "DELETE")).toEqual({ status: 200, body: { task_id: "t-old", deleted: true } });
    expect(await tasks.get("t-old")).toBeUndefined();
    expect(await call(`${url}/api/tasks/t-old`, "DELETE")).toEqual({ status: 404, body: { error: "task t-old not found" } });
  });

  it.each<[string, TaskStatus]>([
    ["t-run", "running"],
    ["t-new", "pending"],
  ])("refuses to delete %s while it is %s: cancel it first", async (id, status) => {
    const { url, tasks } = await start(seed);
    expect(await call(`${url}/api/tasks/${id}`, "DELETE")).toEqual({
      status: 409,
      body: { error: `task ${id} is still ${status}: cancel it first`, task_id: id, status },
    });
    expect(await tasks.get(id)).toBeDefined();
  });
});

describe("the bearer token", () => {
  it("is required on every tasks route", async () => {
    const { url, cancelled, tasks } = await start(seed);
    const routes: Array<[string, string]> = [
      ["GET", "/api/tasks"],
      ["GET", "/api/tasks/stats"],
      ["GET", "/api/tasks/t-run"],
      ["POST", "/api/tasks/t-run/cancel"],
      ["DELETE", "/api/tasks/t-old"],
    ];
    for (const [method, path] of routes) {
      expect(await call(`${url}${path}`, method, {}), `${method} ${path}`).toEqual({ status: 401, body: { error: "missing or wrong bearer token" } });
      expect((await call(`${url}${path}`, method, { authorization: "Bearer wrong" })).status).toBe(401);
    }
    expect(cancelled).toEqual([]);
    expect(await tasks.get("t-old")).toBeDefined();
  });
});
