/**
 * Subagents and scheduled messages end to end: the fake Telegram server, a gateway and workers as
 * processes over real Redis, a fake LLM playing both the main agent and the subagents; on one Redis
 * and on a Redis Cluster of three shards of the test's own (the bus in 6 partitions; BullMQ's
 * queues, the schedule, the store, the budgets and the quotas on the cluster too). Then the same
 * spawn and cron scenarios in the embedded mode (`countbot start`, no Redis, web channel).
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeTelegramServer, startFakeTelegram } from "../support/fake-telegram-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { type OwnCluster, startRedisCluster } from "../support/redis-cluster.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const BOT_TOKEN = "5151:background-jobs-token";
const TOKEN = "background-api-token-0123456789";
const OWNER = 111;

type Body = { messages: Array<{ role: string; content: unknown }> };

/** The fake model: subagents (recognized by their prompt) and the main agent, by what they were asked. */
function script(body: Record<string, unknown>) {
  const { messages } = body as Body;
  const system = String(messages[0]?.content ?? "");
  const toolResults = messages.filter((message) => message.role === "tool");
  const users = messages.filter((message) => message.role === "user").map((message) => String(message.content));
  const lastUser = users.at(-1) ?? "";
  if (system.startsWith("# Subagent")) {
    const task = users[0] ?? "";
    if (task.includes("sleepy")) return toolResults.length === 0 ? { toolCalls: [{ name: "exec", arguments: JSON.stringify({ command: "sleep 30" }) }] } : { text: "slept" };
    if (task.includes("crashy")) return toolResults.length === 0 ? { toolCalls: [{ name: "exec", arguments: JSON.stringify({ command: "sleep 3" }) }] } : { text: "crashy work done" };
    return toolResults.length === 0 ? { toolCalls: [{ name: "list_dir", arguments: "{}" }] } : { text: "Listing finished: the workspace is tidy." };
  }
  const role = /^You are (.+?), one agent/m.exec(system)?.[1];
  if (role) return { text: `${role} findings` };
  const last = messages.at(-1)!;
  if (last.role === "tool") return { text: `ok: ${String(last.content)}` };
  if (lastUser.includes("[Background event]")) return { text: `Background: ${lastUser.replace("[Background event] ", "").slice(0, 300)}` };
  const spawn = (task: string, label: string) => ({ toolCalls: [{ name: "spawn", arguments: JSON.stringify({ task, label }) }] });
  if (lastUser.includes("count files")) return spawn("list the workspace", "lister");
  if (lastUser.includes("sleepy job")) return spawn("a sleepy task", "sleeper");
  if (lastUser.includes("crashy job")) return spawn("a crashy task", "crasher");
  if (lastUser.includes("remind me")) return { toolCalls: [{ name: "cron", arguments: JSON.stringify({ action: "add", message: "ping", cron: "*/2 * * * * *" }) }] };
  return { text: `echo: ${lastUser}` };
}

async function until<T>(probe: () => T | undefined | false, what: string, limitMs = 30_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

let root: string;
let llm: FakeOpenAIServer;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-jobs-"));
  llm = await startFakeOpenAI({ script });
});
afterAll(async () => {
  await stopAllServices();
  await llm?.close();
  await rm(root, { recursive: true, force: true });
});

describe.each([
  { topology: "one Redis", clustered: false },
  { topology: "a Redis Cluster of three shards, the bus in 6 partitions", clustered: true },
])("background jobs over $topology, through Telegram", ({ clustered }) => {
  let prefix: string;
  let redis: Redis;
  let cluster: OwnCluster | undefined;
  let telegram: FakeTelegramServer;
  let env: Record<string, string>;
  let gateway: ServiceProcess;
  let base: string;
  const workers: ServiceProcess[] = [];

  const texts = (after = 0) => telegram.sent.slice(after).filter((item) => item.method === "sendMessage" && item.chatId === OWNER).map((item) => item.text ?? "");
  const say = (text: string) => {
    const mark = telegram.sent.length;
    telegram.sendText({ chatId: OWNER, from: telegram.user({ id: OWNER, first_name: "Owner" }), text });
    return mark;
  };
  const api = (route: string, init: RequestInit = {}) => fetch(`${base}${route}`, { ...init, headers: { authorization: `Bearer ${TOKEN}`, ...(init.headers ?? {}) } });
  const tasks = async (status?: string) =>
    (await (await api(`/api/tasks?session_id=telegram:${OWNER}${status ? `&status=${status}` : ""}`)).json()) as Array<{ task_id: string; label: string; status: string; error?: string | null }>;

  beforeAll(async () => {
    prefix = `countbot-jobs-${randomUUID()}`;
    cluster = clustered ? await startRedisCluster(3) : undefined;
    // On the cluster, a connection to the shard that owns the deployment's `{prefix}` keys (the cron
    // schedule's among them): a plain client reads them there.
    redis = cluster ? await shardOwning(cluster, `{${prefix}}`) : new Redis(redisUrl);
    telegram = await startFakeTelegram({ token: BOT_TOKEN });
    const configFile = path.join(root, clustered ? "cluster.json" : "redis.json");
    await writeFile(
      configFile,
      JSON.stringify({
        redis: { prefix, leaseTtlMs: 2_000, ...(cluster ? { cluster: cluster.nodes, partitions: 6 } : {}) },
        jobs: { lockDurationMs: 2_000, stalledIntervalMs: 1_000 },
        agent: { providerRetries: 0 },
        channels: { telegram: { enabled: true, allowFrom: [String(OWNER)] } },
        teams: { Pair: { mode: "pipeline", agents: [{ id: "drafter", role: "Drafter", task: "draft it" }, { id: "editor", role: "Editor", task: "edit the draft" }] } },
      }),
    );
    env = {
      HOME: root,
      // With redis.cluster, the URL only switches Redis on: the nodes come from the config.
      REDIS_URL: cluster ? `redis://127.0.0.1:${cluster.nodes[0]!.port}` : redisUrl,
      COUNTBOT_CONFIG: configFile,
      COUNTBOT_DATA_DIR: path.join(root, clustered ? "cluster-data" : "redis-data"),
      COUNTBOT_API_PORT: "0",
      COUNTBOT_API_TOKEN: TOKEN,
      TELEGRAM_BOT_TOKEN: BOT_TOKEN,
      TELEGRAM_API_ROOT: telegram.apiRoot,
      OPENAI_API_KEY: "sk-jobs-0123456789",
      OPENAI_BASE_URL: llm.url,
      LOG_LEVEL: "info",
    };
    gateway = startService(["gateway"], env);
    base = String((await gateway.waitForLog(/gateway listening/)).url);
    await gateway.waitForLog(/channel connected/);
    workers.push(startService(["worker"], env), startService(["worker"], env));
    await Promise.all(workers.map((worker) => worker.waitForLog(/worker started/)));
  }, 60_000);

  afterAll(async () => {
    await stopAllServices();
    await telegram?.close();
    if (cluster) await cluster.stop();
    else await deleteKeys(redis, prefix);
    redis?.disconnect();
  });

  it("answers a long job at once, then brings the subagent's result into the same chat", { timeout: 60_000 }, async () => {
    const mark = say("please count files in the background");
    const [started] = await until(() => (texts(mark).length >= 1 ? texts(mark) : undefined), "the started reply");
    expect(started).toMatch(/^ok: Subagent \[lister\] started \(ID: [\w-]+\)\. I'll tell you when it is done\./);
    const result = await until(() => texts(mark).find((text) => text.startsWith("Background:")), "the result in the chat");
    expect(result).toContain("Subagent [lister]");
    expect(result).toContain("completed");
    expect(result).toContain("Listing finished: the workspace is tidy.");
    const [task] = await tasks("completed");
    expect(task).toMatchObject({ label: "lister", status: "completed" });
  });

  it("cancels a subagent through the API while it is in a tool, and tells the chat", { timeout: 60_000 }, async () => {
    const calls = llm.requests.length;
    const mark = say("start the sleepy job");
    await until(() => texts(mark).find((text) => text.includes("[sleeper] started")), "the started reply");
    // Mid-tool: the subagent has asked for `sleep 30` and the model sees no result yet.
    await until(() => llm.requests.slice(calls).some((request) => JSON.stringify(request.body).includes("a sleepy task") && !JSON.stringify(request.body).includes('"role":"tool"')), "the subagent's first call");
    let task: Awaited<ReturnType<typeof tasks>>[number] | undefined;
    for (let attempt = 0; attempt < 200 && !task; attempt += 1) {
      task = (await tasks("running")).find((candidate) => candidate.label === "sleeper");
      if (!task) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(task).toBeDefined();
    const response = await api(`/api/tasks/${task!.task_id}/cancel`, { method: "POST" });
    expect(response.status).toBeLessThan(300);
    const told = await until(() => texts(mark).find((text) => text.includes("[sleeper]") && text.includes("cancelled")), "the cancel notice in the chat");
    expect(told).toContain("Background:");
    const detail = (await (await api(`/api/tasks/${task!.task_id}`)).json()) as { status: string };
    expect(detail.status).toBe("cancelled");
  });

  it("fires a scheduled message twice, each answered, not doubled by two workers, and after a worker restart", { timeout: 90_000 }, async () => {
    const mark = say("remind me every two seconds");
    await until(() => texts(mark).find((text) => text.startsWith("ok: Scheduled")), "the scheduled reply");
    const firings = () => texts(mark).filter((text) => text.includes("Scheduled (") && text.startsWith("Background:"));
    await until(() => firings().length >= 2, "two firings");
    // Restart one worker: the schedule lives in Redis and keeps firing.
    await workers[0]!.stop("SIGTERM");
    workers[0] = startService(["worker"], env);
    const before = firings().length;
    await until(() => firings().length >= before + 2, "firings after the restart");
    const stamps = firings().map((text) => /for (\S+): ping/.exec(text)?.[1]);
    expect(stamps.every(Boolean)).toBe(true);
    expect(new Set(stamps).size).toBe(stamps.length);
    const jobs = (await redis.keys(`{${prefix}}:cron*`)).length;
    expect(jobs).toBeGreaterThan(0);
  });

  it("recovers a subagent whose worker was killed: it completes elsewhere or fails with a reason, and the chat is told", { timeout: 90_000 }, async () => {
    // One worker, so the killed one is the one running the subagent.
    await workers[1]!.stop("SIGTERM");
    const calls = llm.requests.length;
    const mark = say("start the crashy job");
    await until(() => texts(mark).find((text) => text.includes("[crasher] started")), "the started reply");
    await until(() => llm.requests.slice(calls).some((request) => JSON.stringify(request.body).includes("a crashy task")), "the subagent's first call");
    await workers[0]!.stop("SIGKILL");
    workers[0] = startService(["worker"], env);
    const told = await until(() => texts(mark).find((text) => text.includes("[crasher]") && text.startsWith("Background:")), "the outcome in the chat", 60_000);
    expect(told).toMatch(/crashy work done|failed: .+/);
    const [task] = await tasks();
    expect(["completed", "failed"]).toContain(task!.status);
  });

  it("runs a team's stages as jobs and brings its result into the chat", { timeout: 60_000 }, async () => {
    const mark = say("@pair tidy the docs");
    const started = await until(() => texts(mark).find((text) => text.startsWith("Team [Pair] started")), "the started reply");
    const runId = /run ID: (wf-[0-9a-f]+)/.exec(started)?.[1];
    expect(runId).toBeDefined();
    const result = await until(() => texts(mark).find((text) => text.startsWith("Background:")), "the team's result in the chat");
    expect(result).toMatch(new RegExp(`^Background: Team \\[Pair\\] \\(run ID: ${runId}\\) completed\\.\\n\\nResult:\\nEditor findings`));
    const run = (await (await api(`/api/workflow-runs/${runId}`)).json()) as { status: string; nodes: Array<{ id: string; status: string }> };
    expect(run.status).toBe("completed");
    expect(run.nodes.map((node) => [node.id, node.status])).toEqual([
      ["drafter", "completed"],
      ["editor", "completed"],
    ]);
  });
});

/** A plain connection to the cluster's shard that owns `key`'s slot. */
async function shardOwning(cluster: OwnCluster, key: string): Promise<Redis> {
  for (const node of cluster.nodes) {
    const shard = new Redis(node.port, node.host);
    const slot = Number(await shard.call("CLUSTER", "KEYSLOT", key));
    const ranges = (await shard.call("CLUSTER", "SLOTS")) as Array<[number, number, [string, number]]>;
    if (ranges.some(([from, to, [, port]]) => slot >= from && slot <= to && port === node.port)) return shard;
    shard.disconnect();
  }
  throw new Error(`no shard owns ${key}`);
}

const EMBEDDED_TOKEN = "embedded-api-token-0123456789";

describe("background jobs embedded (countbot start, no Redis)", () => {
  it("runs the same spawn and cron scenarios in one process", { timeout: 60_000 }, async () => {
    const service = startService(["start"], {
      HOME: root,
      COUNTBOT_DATA_DIR: path.join(root, "embedded-data"),
      COUNTBOT_API_PORT: "0",
      COUNTBOT_API_TOKEN: EMBEDDED_TOKEN,
      OPENAI_API_KEY: "sk-embedded-0123456789",
      OPENAI_BASE_URL: llm.url,
      LOG_LEVEL: "info",
    });
    const started = await service.waitForLog(/countbot started/);
    expect(started.bus).toBe("memory");
    const base = String(started.url);
    const finals: string[] = [];
    const notices: string[] = [];
    const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=embedded`, { headers: { authorization: `Bearer ${EMBEDDED_TOKEN}` } });
    socket.on("message", (data) => {
      const event = JSON.parse(String(data)) as { type: string; content: string };
      if (event.type === "message") finals.push(event.content);
      if (event.type === "notice") notices.push(event.content);
    });
    await new Promise((resolve) => socket.once("open", resolve));
    const post = (content: string) =>
      fetch(`${base}/api/chat/embedded/messages`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${EMBEDDED_TOKEN}` }, body: JSON.stringify({ content }) });

    await post("please count files in the background");
    await until(() => finals.find((text) => text.includes("[lister] started")), "the started reply");
    const result = await until(() => finals.find((text) => text.startsWith("Background:") && text.includes("[lister]")), "the subagent result");
    expect(result).toContain("Listing finished");
    // The web page hears of the task's life as notices.
    expect(notices).toContain("Subagent [lister] started");
    expect(notices).toContain("Subagent [lister] completed");
    // The subagent's tool calls are audited like the main agent's.
    const audit = await readFile(path.join(root, "embedded-data", "audit", "tool-calls.jsonl"), "utf8");
    const subagentCalls = audit.split("\n").filter(Boolean).map((line) => JSON.parse(line) as { channel: string; tool: string });
    expect(subagentCalls).toContainEqual(expect.objectContaining({ channel: "subagent", tool: "list_dir" }));

    await post("remind me every two seconds");
    await until(() => finals.find((text) => text.startsWith("ok: Scheduled")), "the scheduled reply");
    await until(() => finals.filter((text) => text.includes("Scheduled (")).length >= 2, "two firings");
    socket.close();
    expect(await service.stop("SIGTERM")).toBe(0);
  });
});
