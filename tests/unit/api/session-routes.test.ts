/**
 * The sessions and operations APIs through a real listening server, over the file store, the file
 * memory store and the memory bus: what the web console's Sessions and Operations views read.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createFileMemoryStore } from "../../../src/memory/memory.js";
import { createPersonMemory } from "../../../src/memory/person-memory.js";
import { registerOperationRoutes } from "../../../src/api/operations-routes.js";
import { type Readiness, createApiServer } from "../../../src/api/server.js";
import { registerSessionRoutes } from "../../../src/api/session-routes.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import { createFileStore } from "../../../src/store/file-store.js";

const TOKEN = "sessions-test-token-0123456789";
const T0 = Date.UTC(2026, 2, 1, 12, 0, 0);

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function start(options: { readiness?: () => Promise<Readiness>; queues?: () => Promise<never>; partTimeoutMs?: number } = {}) {
  const root = await mkdtemp(path.join(tmpdir(), "countbot-session-routes-"));
  cleanups.push(() => rm(root, { recursive: true, force: true }));
  let clock = T0;
  const now = () => clock;
  const store = createFileStore({ dataDir: path.join(root, "data"), now });
  cleanups.push(() => store.close());
  const memory = createFileMemoryStore({ workspace: path.join(root, "workspace"), scope: "chat", now });
  const people = createPersonMemory(createFileMemoryStore({ workspace: path.join(root, "workspace"), scope: "person", now }), { alice: ["telegram:1", "discord:1"] });
  const bus = createMemoryBus({ now });
  cleanups.push(() => bus.close());
  const server = createApiServer({
    bus,
    config: { host: "127.0.0.1", port: 0, token: TOKEN },
    logger: pino({ level: "silent" }),
    readiness: async () => ({ ready: true, checks: {} }),
    routes: [
      (scope) => {
        registerSessionRoutes(scope, { sessions: store.sessions, memory, people });
        registerOperationRoutes(scope, {
          kind: "memory",
          bus,
          readiness: options.readiness ?? (async () => ({ ready: true, checks: { worker: { ok: true, detail: "0 turns running" } } })),
          tasks: store.tasks,
          queues: options.queues ?? (async () => [{ queue: "subagents", waiting: 2, active: 1, failed: 0 }]),
          links: { metrics: "/metrics", queues: null },
          ...(options.partTimeoutMs === undefined ? {} : { partTimeoutMs: options.partTimeoutMs }),
        });
      },
    ],
  });
  cleanups.push(() => server.close());
  const { url } = await server.listen();
  const get = async (route: string, token = TOKEN) => {
    const response = await fetch(`${url}${route}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: response.status, body: (await response.json()) as never as Record<string, unknown> & Array<Record<string, unknown>> };
  };
  return { store, memory, people, bus, get, tick: (ms: number) => (clock += ms) };
}

describe("/api/sessions", () => {
  it("lists the sessions by latest activity, of one channel when asked", async () => {
    const api = await start();
    await api.store.sessions.append("telegram:42", [{ role: "user", content: "hi", at: T0 }]);
    api.tick(1_000);
    await api.store.sessions.append("web:room:1", [{ role: "user", content: "hello", at: T0 + 1_000 }]);
    api.tick(1_000);
    await api.store.sessions.append("telegram:7", [{ role: "user", content: "yo", at: T0 + 2_000 }]);

    const all = await api.get("/api/sessions");
    expect(all.status).toBe(200);
    expect(all.body.map((session) => [session.key, session.channel, session.chatId])).toEqual([
      ["telegram:7", "telegram", "7"],
      ["web:room:1", "web", "room:1"],
      ["telegram:42", "telegram", "42"],
    ]);
    expect(all.body[0]).toMatchObject({ updatedAt: new Date(T0 + 2_000).toISOString(), generation: 0 });
    expect((await api.get("/api/sessions?channel=telegram")).body.map((session) => session.key)).toEqual(["telegram:7", "telegram:42"]);
    expect((await api.get("/api/sessions?channel=telegram&limit=1")).body.map((session) => session.key)).toEqual(["telegram:7"]);
    expect((await api.get("/api/sessions?channel=no%20such")).body.error).toMatch(/^channel: expected a channel name/);
    expect((await api.get("/api/sessions?limit=0")).body.error).toMatch(/^limit: /);
    expect((await api.get("/api/sessions", "wrong")).status).toBe(401);
  });

  it("shows a session's history, and an unknown one as empty", async () => {
    const api = await start();
    await api.store.sessions.append("web:room-1", [
      { role: "user", content: "what is 2+2?", at: T0, messageIds: ["m1"] },
      { role: "assistant", content: "**4**", at: T0 + 500, model: "openai/gpt-4o-mini", usage: { inputTokens: 12, outputTokens: 3 } },
    ]);
    const session = await api.get("/api/sessions/web:room-1");
    expect(session.body).toMatchObject({ key: "web:room-1", channel: "web", chatId: "room-1" });
    expect(session.body.history).toEqual([
      { role: "user", content: "what is 2+2?", at: new Date(T0).toISOString() },
      { role: "assistant", content: "**4**", at: new Date(T0 + 500).toISOString(), model: "openai/gpt-4o-mini", usage: { inputTokens: 12, outputTokens: 3 } },
    ]);
    expect((await api.get("/api/sessions/web:nobody")).body).toMatchObject({ key: "web:nobody", history: [] });
    expect((await api.get("/api/sessions/no-colon")).body.error).toMatch(/^sessionKey: expected a session key/);
  });

  it("shows a session's long-term memory and where it is kept", async () => {
    const api = await start();
    await api.memory.write("web:room-1", "# Facts\n- likes tea\n");
    expect((await api.get("/api/sessions/web:room-1/memory")).body).toEqual({
      key: "web:room-1",
      scope: "chat",
      location: api.memory.location("web:room-1"),
      content: "# Facts\n- likes tea\n",
      people: [],
    });
    expect((await api.get("/api/sessions/web:other/memory")).body).toMatchObject({ content: "" });
  });

  it("shows the person memory of everyone who spoke in the chat, and of nobody else", async () => {
    const api = await start();
    await api.store.sessions.append("discord:guild-1", [
      { role: "user", content: "[Alice (discord:1)] hi\n\n[Bob (discord:2)] hello", at: T0, speakers: ["discord:1", "discord:2"] },
      { role: "assistant", content: "hi both", at: T0 },
      { role: "event", content: "[Background event] done", at: T0 },
    ]);
    await api.people.store.write("alice", "Alice is vegetarian.");
    await api.people.store.write("discord:3", "Carol's secret");
    expect((await api.get("/api/sessions/discord:guild-1/memory")).body).toMatchObject({
      people: [
        { person: "discord:1", location: "memory/people/alice/MEMORY.md", content: "Alice is vegetarian." },
        { person: "discord:2", location: "memory/people/discord%3A2/MEMORY.md", content: "" },
      ],
    });
    expect((await api.get("/api/sessions/discord:guild-1")).body).toMatchObject({ history: [{ role: "user" }, { role: "assistant" }, { role: "event" }] });
  });
});

describe("/api/operations and /api/dead-letters", () => {
  it("reports readiness, chats waiting and answered, queues, tasks and the operator links", async () => {
    const api = await start();
    await api.bus.publishInbound({ id: "a1", channel: "web", chatId: "a", senderId: "u", content: "one", media: [], mentions: [], receivedAt: T0, metadata: {} });
    await api.bus.publishInbound({ id: "b1", channel: "web", chatId: "b", senderId: "u", content: "two", media: [], mentions: [], receivedAt: T0, metadata: {} });
    const claim = await api.bus.claimSession({ timeoutMs: 1_000 });
    expect(claim).not.toBeNull();
    const overview = (await api.get("/api/operations")).body;
    expect(overview).toEqual({
      kind: "memory",
      ready: true,
      checks: { worker: { ok: true, detail: "0 turns running" } },
      channels: [],
      sessions: { waiting: 1, answering: 1, deadLetters: 0 },
      queues: [{ queue: "subagents", waiting: 2, active: 1, failed: 0 }],
      tasks: { total: 0, pending: 0, running: 0, completed: 0, failed: 0, cancelled: 0 },
      processes: [],
      links: { metrics: "/metrics", queues: null },
    });
  });

  it("is not ready when a check fails, or when the checks throw", async () => {
    const failing = await start({ readiness: async () => ({ ready: true, checks: { redis: { ok: false, detail: "connection closed" } } }) });
    expect((await failing.get("/api/operations")).body).toMatchObject({ ready: false, checks: { redis: { ok: false, detail: "connection closed" } } });
    const throwing = await start({
      readiness: async () => {
        throw new Error("no answer");
      },
    });
    expect((await throwing.get("/api/operations")).body).toMatchObject({ ready: false, checks: { readiness: { ok: false, detail: "no answer" } } });
  });

  it("answers without a part that hangs or fails, and says which (a Redis that is down holds its commands)", async () => {
    const hanging = await start({ queues: () => new Promise<never>(() => undefined), readiness: () => new Promise<never>(() => undefined), partTimeoutMs: 100 });
    const overview = (await hanging.get("/api/operations")).body;
    expect(overview).toMatchObject({
      ready: false,
      checks: { overview: { ok: false, detail: "not shown (0 or none in their place): readiness: no answer within 100 ms; background queues: no answer within 100 ms" } },
      sessions: { waiting: 0, answering: 0, deadLetters: 0 },
      queues: [],
    });
    const failing = await start({ queues: async () => Promise.reject(new Error("Connection is closed.")) });
    expect((await failing.get("/api/operations")).body).toMatchObject({
      ready: false,
      checks: { worker: { ok: true }, overview: { ok: false, detail: "not shown (0 or none in their place): background queues: Connection is closed." } },
    });
  });

  it("lists the dead letters newest first, with their messages cut", async () => {
    const api = await start();
    await api.bus.publishInbound({ id: "p1", channel: "web", chatId: "poison", senderId: "mallory", content: "x".repeat(3_000), media: [], mentions: [], receivedAt: T0, metadata: {} });
    const claim = (await api.bus.claimSession({ timeoutMs: 1_000 }))!;
    api.tick(5_000);
    await api.bus.deadLetter(claim, "the turn failed 3 times: model unreachable");
    const letters = (await api.get("/api/dead-letters")).body;
    expect(letters).toHaveLength(1);
    expect(letters[0]).toMatchObject({ sessionKey: "web:poison", reason: "the turn failed 3 times: model unreachable", at: new Date(T0 + 5_000).toISOString() });
    const [message] = letters[0]!.messages as Array<{ id: string; senderId: string; content: string }>;
    expect(message).toMatchObject({ id: "p1", senderId: "mallory" });
    expect(message!.content).toHaveLength(2_001);
    expect((await api.get("/api/operations")).body).toMatchObject({ sessions: { deadLetters: 1 } });
    expect((await api.get("/api/dead-letters?limit=x")).body.error).toMatch(/^limit: expected a whole number/);
  });
});
