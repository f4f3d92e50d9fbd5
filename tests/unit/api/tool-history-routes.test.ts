import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type ApiServer, createApiServer } from "../../../src/api/server.js";
import { registerToolHistoryRoutes } from "../../../src/api/tool-history-routes.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import { type ToolHistory, createFileToolHistory } from "../../../src/tools/tool-history.js";

let root: string;
let history: ToolHistory;
let server: ApiServer;
let base: string;
const token = "history-token-0123456789";

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-history-api-"));
  history = createFileToolHistory({ directory: root });
  server = createApiServer({
    bus: createMemoryBus(),
    config: { host: "127.0.0.1", port: 0, token },
    logger: pino({ level: "silent" }),
    readiness: async () => ({ ready: true, checks: {} }),
    routes: [(scope) => registerToolHistoryRoutes(scope, history)],
  });
  base = (await server.listen()).url;
});
afterEach(async () => {
  await server.close();
  await history.close();
  await rm(root, { recursive: true, force: true });
});

const get = (route: string, withToken = true) => fetch(`${base}${route}`, { headers: withToken ? { authorization: `Bearer ${token}` } : {} });

describe("GET /api/sessions/:sessionKey/tool-history", () => {
  it("lists a session's tool calls newest first, filtered by tool", async () => {
    const call = { sessionKey: "telegram:42", userMessage: "look", durationMs: 3, success: true };
    await history.add({ ...call, tool: "list_dir", arguments: {}, result: "a.txt" });
    await history.add({ ...call, tool: "read_file", arguments: { path: "a.txt" }, result: "hello" });
    await history.add({ ...call, sessionKey: "telegram:7", tool: "read_file", arguments: {}, result: "other chat" });
    const all = (await (await get("/api/sessions/telegram:42/tool-history")).json()) as Array<{ tool: string; result: string }>;
    expect(all.map((entry) => entry.tool)).toEqual(["read_file", "list_dir"]);
    const reads = (await (await get("/api/sessions/telegram:42/tool-history?tool=read_file")).json()) as Array<{ result: string }>;
    expect(reads.map((entry) => entry.result)).toEqual(["hello"]);
  });

  it("needs the token and names a bad query field", async () => {
    expect((await get("/api/sessions/telegram:42/tool-history", false)).status).toBe(401);
    const bad = await get("/api/sessions/telegram:42/tool-history?limit=0");
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toContain("limit");
  });
});
