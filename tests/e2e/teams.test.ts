/**
 * Agent teams end to end: the fake Telegram server, a gateway and two workers as processes over
 * real Redis, a fake OpenAI server playing the main agent and every team agent (told apart by
 * their prompts). Each agent is a job on the `workflows` queue, so the analysts of one run spread
 * over both workers (two agents per worker at most), and a worker killed mid-run costs only the
 * agents it was running: the fake server counts the model calls of every agent of every run.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeTelegramServer, type SentItem, startFakeTelegram } from "../support/fake-telegram-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const BOT_TOKEN = "5353:teams-e2e-secret-token";
const API_TOKEN = "teams-api-token-0123456789";
const OWNER = 111;
const SECOND = 222;
const GROUP = -100300;
const ANALYSTS = ["Frontend analyst", "Backend analyst", "Database expert"];

/** A model call as the fake server saw it. */
interface AgentCall {
  role: string;
  goal: string;
  model: string;
  input: string;
}

/** A promise that the test resolves; also resolved at the end so no held response outlives the file. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  held.push(open);
  return { promise, open };
}
const held: Array<() => void> = [];

const calls: AgentCall[] = [];
/** The first run's analysts answer only once all three are in flight at once. */
const overlap = gate();
let overlapSeen = false;
/** The crash drill's held analysts answer once the test has killed a worker. */
const afterCrash = gate();
const never = gate();

function script(body: Record<string, unknown>): FakeOpenAIStep {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const system = String(messages[0]?.content ?? "");
  const input = String(messages[1]?.content ?? "");
  const last = messages.at(-1)!;
  const lastText = typeof last.content === "string" ? last.content : "";
  const role = system.startsWith("# Council synthesis") ? "synthesis" : /^You are (.+?), one agent/m.exec(system)?.[1];
  if (role) {
    const goal = /^Goal: (.*)$/m.exec(input)?.[1] ?? "";
    calls.push({ role, goal, model: String(body.model), input });
    if (goal === "review the shop" && ANALYSTS.includes(role)) {
      if (calls.filter((call) => call.goal === goal && ANALYSTS.includes(call.role)).length === 3) {
        overlapSeen = true;
        overlap.open();
      }
      return { text: `${role} findings`, until: overlap.promise };
    }
    if (goal === "crash drill" && role !== "Frontend analyst" && ANALYSTS.includes(role)) return { text: `${role} drill findings`, until: afterCrash.promise };
    if (role === "Sleeper") return { text: "woke up", until: never.promise };
    if (role === "Broken") return { error: { status: 400, message: "the broken agent's model refused" } };
    if (role === "synthesis") return { text: "Council verdict: go ahead" };
    if (input.includes("Your first analysis:")) return { text: `${role} revised position` };
    return { text: `${role} ${goal === "crash drill" ? "drill " : ""}findings` };
  }
  if (lastText.startsWith("[Background event]")) return { text: `Background: ${lastText.replace("[Background event] ", "").split("\n<!--")[0]!.slice(0, 1_500)}` };
  return { text: `echo: ${lastText}` };
}

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let telegram: FakeTelegramServer;
let gateway: ServiceProcess;
let base: string;
const workers: ServiceProcess[] = [];

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-teams-"));
  prefix = `countbot-teams-${randomUUID()}`;
  redis = new Redis(redisUrl);
  telegram = await startFakeTelegram({ token: BOT_TOKEN });
  llm = await startFakeOpenAI({ script });
  const configFile = path.join(root, "countbot.json");
  await writeFile(
    configFile,
    JSON.stringify({
      redis: { prefix, leaseTtlMs: 2_000 },
      jobs: { lockDurationMs: 2_000, stalledIntervalMs: 1_000 },
      agent: { providerRetries: 0 },
      workflows: { concurrency: 2 },
      shutdownGraceMs: 1_000,
      channels: { telegram: { enabled: true, allowFrom: [String(OWNER), String(SECOND)], groupPolicy: "mention", rateLimitPerMinute: 100 } },
      teams: {
        Analysts: {
          mode: "graph",
          description: "three analysts side by side, then an architect",
          agents: [
            { id: "frontend", role: "Frontend analyst", task: "analyse the front end", model: "openai/analyst-model" },
            { id: "backend", role: "Backend analyst", task: "analyse the back end" },
            { id: "database", role: "Database expert", task: "analyse the database" },
            { id: "integrator", role: "Architect", task: "combine the analyses into one report", dependsOn: ["frontend", "backend", "database"] },
          ],
        },
        Fragile: {
          mode: "graph",
          agents: [
            { id: "steady", role: "Steady", task: "do the steady part" },
            { id: "broken", role: "Broken", task: "fail" },
            { id: "after", role: "After", task: "build on the broken part", dependsOn: ["broken"] },
          ],
        },
        Sleepers: { mode: "graph", agents: [{ id: "sleeper", role: "Sleeper", task: "take a long time" }] },
      },
    }),
  );
  const env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    COUNTBOT_API_TOKEN: API_TOKEN,
    TELEGRAM_BOT_TOKEN: BOT_TOKEN,
    TELEGRAM_API_ROOT: telegram.apiRoot,
    OPENAI_API_KEY: "sk-teams-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  gateway = startService(["gateway"], env);
  base = String((await gateway.waitForLog(/gateway listening/)).url);
  await gateway.waitForLog(/channel connected/);
  workers.push(startService(["worker"], env), startService(["worker"], env));
  await Promise.all(workers.map((worker) => worker.waitForLog(/worker started/)));
}, 90_000);

afterAll(async () => {
  for (const open of held) open();
  await stopAllServices();
  await telegram?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis?.quit();
  await rm(root, { recursive: true, force: true });
});

const user = (id: number) => telegram.user({ id, first_name: `User ${id}` });
const messagesTo = (chatId: number, after: number): SentItem[] => telegram.sent.slice(after).filter((item) => item.chatId === chatId && item.method === "sendMessage");
function say(chatId: number, text: string, from = chatId > 0 ? chatId : OWNER): number {
  const mark = telegram.sent.length;
  telegram.sendText({ chatId, from: user(from), text });
  return mark;
}
function messageTo(chatId: number, after: number, matching: RegExp, what: string): Promise<string> {
  return telegram.waitFor(() => messagesTo(chatId, after).find((item) => matching.test(item.text ?? ""))?.text, { timeoutMs: 60_000, what });
}
async function api<T>(route: string, init: RequestInit & { json?: unknown } = {}): Promise<{ status: number; body: T }> {
  const response = await fetch(`${base}${route}`, {
    ...init,
    body: init.json === undefined ? init.body : JSON.stringify(init.json),
    headers: { authorization: `Bearer ${API_TOKEN}`, ...(init.json === undefined ? {} : { "content-type": "application/json" }) },
  });
  return { status: response.status, body: (await response.json()) as T };
}
interface RunJson {
  id: string;
  status: string;
  chat: string;
  goal: string;
  nodes: Array<{ id: string; status: string; output?: string | null; attempts: number; error: string | null }>;
}
async function until<T>(probe: () => Promise<T | undefined> | T | undefined, what: string, limitMs = 60_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${whatWentWrong()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
/** On a timeout: the warnings and errors the processes logged, and the model calls so far, so a failure says where it stuck. */
function whatWentWrong(): string {
  const problems = [gateway, ...workers].flatMap((service, index) =>
    service
      .output()
      .split("\n")
      .filter((line) => /"level":(40|50|60)/.test(line))
      .slice(-15)
      .map((line) => `${index === 0 ? "gateway" : `worker ${index}`}: ${line.slice(0, 400)}`),
  );
  const recent = calls.slice(-12).map((call) => `${call.role} (${call.goal})`);
  return `model calls, newest last: ${recent.join(", ")}\n${problems.join("\n") || "no warnings or errors logged"}`;
}
const runIdOf = (text: string) => /\(run ID: (wf-[0-9a-f]+)\)/.exec(text)?.[1] ?? "";
/** The nodes each worker process logged as started for a run. */
function nodesStartedBy(worker: ServiceProcess, runId: string): string[] {
  return worker
    .output()
    .split("\n")
    .flatMap((line) => {
      try {
        const record = JSON.parse(line) as { msg?: string; runId?: string; nodeId?: string };
        return record.msg === "workflow node started" && record.runId === runId && record.nodeId ? [record.nodeId] : [];
      } catch {
        return [];
      }
    });
}

describe("agent teams over Redis, through Telegram, on two workers", () => {
  it("runs three analysts at once on both workers, gives the architect all three outputs and the chat one result", { timeout: 120_000 }, async () => {
    const mark = say(OWNER, "@analysts review the shop");
    const started = await messageTo(OWNER, mark, /^Team \[Analysts\] started/, "the started reply");
    expect(started).toMatch(/^Team \[Analysts\] started \(run ID: wf-[0-9a-f]{32}\) with 4 steps\./);
    const runId = runIdOf(started);
    const result = await messageTo(OWNER, mark, /^Background:/, "the team's result in the chat");
    expect(result).toMatch(new RegExp(`^Background: Team \\[Analysts\\] \\(run ID: ${runId}\\) completed\\.\\n\\nResult:\\nArchitect findings`));
    // All three analysts were in flight at the same moment: the fake answered none before the third arrived.
    expect(overlapSeen).toBe(true);
    const runCalls = calls.filter((call) => call.goal === "review the shop");
    expect(runCalls.map((call) => call.role).sort()).toEqual(["Architect", ...ANALYSTS].sort());
    const architect = runCalls.find((call) => call.role === "Architect")!;
    for (const role of ANALYSTS) expect(architect.input).toContain(`${role} findings`);
    // The frontend analyst has a model of its own.
    expect(runCalls.find((call) => call.role === "Frontend analyst")?.model).toBe("analyst-model");
    expect(runCalls.find((call) => call.role === "Backend analyst")?.model).toBe("gpt-4o-mini");
    // Spread over both workers (each runs two agents at most).
    const byWorker = workers.map((worker) => nodesStartedBy(worker, runId));
    expect(byWorker.every((nodes) => nodes.some((node) => ["frontend", "backend", "database"].includes(node)))).toBe(true);
    expect(byWorker.flat().sort()).toEqual(["backend", "database", "frontend", "integrator"]);
    // One result in the chat, and one status message (edited in place) instead of a message per notice.
    // A later message's answer: anything still to come for the run (a second result) came before it.
    say(OWNER, "settle");
    await messageTo(OWNER, mark, /^echo: settle$/, "the settling reply");
    const texts = messagesTo(OWNER, mark).map((item) => item.text ?? "");
    expect(texts.filter((text) => !text.startsWith("Team [Analysts] ·"))).toEqual([started, result, "echo: settle"]);
    expect(texts.filter((text) => text.startsWith("Team [Analysts] ·"))).toHaveLength(1);
    const { body: run } = await api<RunJson>(`/api/workflow-runs/${runId}`);
    expect(run).toMatchObject({ status: "completed", chat: `telegram:${OWNER}`, goal: "review the shop" });
    expect(run.nodes.map((node) => [node.id, node.status, node.attempts])).toEqual([
      ["frontend", "completed", 1],
      ["backend", "completed", 1],
      ["database", "completed", 1],
      ["integrator", "completed", 1],
    ]);
  });

  it("refuses a cycle at creation with an error naming it", async () => {
    const cyclic = { name: "Loop", mode: "graph", agents: [{ id: "a", role: "A", task: "a", dependsOn: ["c"] }, { id: "b", role: "B", task: "b", dependsOn: ["a"] }, { id: "c", role: "C", task: "c", dependsOn: ["b"] }] };
    expect(await api("/api/agent-teams", { method: "POST", json: cyclic })).toEqual({ status: 400, body: { error: "agents[0].dependsOn: dependency cycle: a → c → b → a; a graph must not loop back" } });
    expect((await api("/api/agent-teams", { method: "POST", json: { ...cyclic, name: "analysts", agents: [{ id: "a", role: "A", task: "a" }] } })).status).toBe(409);
  });

  it("marks what needs a failed agent upstream failed and tells the chat which", { timeout: 90_000 }, async () => {
    const mark = say(SECOND, "/team Fragile keep going");
    const runId = runIdOf(await messageTo(SECOND, mark, /^Team \[Fragile\] started/, "the started reply"));
    const result = await messageTo(SECOND, mark, /^Background:/, "the result");
    expect(result).toContain(`Team [Fragile] (run ID: ${runId}) completed.`);
    expect(result).toContain("Steady findings");
    expect(result).toContain("Broken (broken) failed: ");
    expect(result).toContain("the broken agent's model refused");
    expect(result).toContain("After (after) did not run: upstream agent broken failed");
    expect(calls.filter((call) => call.goal === "keep going" && call.role === "After")).toEqual([]);
  });

  it("runs a council with cross-review: two rounds and a synthesis", { timeout: 90_000 }, async () => {
    const council = {
      name: "Review Council",
      mode: "council",
      crossReview: true,
      agents: [
        { id: "tech", role: "Tech expert", perspective: "feasibility" },
        { id: "biz", role: "Business analyst", perspective: "value" },
        { id: "risk", role: "Risk manager", perspective: "risk" },
      ],
    };
    expect((await api("/api/agent-teams", { method: "POST", json: council })).status).toBe(201);
    const mark = say(OWNER, "@Review Council adopt the new stack?");
    const result = await messageTo(OWNER, mark, /^Background:/, "the council's verdict");
    expect(result).toContain("Result:\nCouncil verdict: go ahead");
    const runCalls = calls.filter((call) => call.goal === "adopt the new stack?");
    expect(runCalls).toHaveLength(7);
    expect(runCalls.filter((call) => call.input.includes("Your first analysis:"))).toHaveLength(3);
    const synthesis = runCalls.find((call) => call.role === "synthesis")!;
    for (const role of ["Tech expert", "Business analyst", "Risk manager"]) expect(synthesis.input).toContain(`${role} revised position`);
  });

  it("gives the same team triggered in two chats at once two independent runs", { timeout: 90_000 }, async () => {
    const marks = [say(OWNER, "@Analysts two chats"), say(SECOND, "@Analysts two chats")];
    const results = await Promise.all([messageTo(OWNER, marks[0]!, /^Background:/, "owner's result"), messageTo(SECOND, marks[1]!, /^Background:/, "second's result")]);
    const ids = results.map(runIdOf);
    expect(new Set(ids).size).toBe(2);
    for (const result of results) expect(result).toContain("completed.");
    const { body: runs } = await api<RunJson[]>("/api/workflow-runs?team=Analysts&status=completed");
    expect(runs.filter((run) => run.goal === "two chats").map((run) => run.chat).sort()).toEqual([`telegram:${OWNER}`, `telegram:${SECOND}`]);
    expect(calls.filter((call) => call.goal === "two chats")).toHaveLength(8);
  });

  it("cancels one chat's run on /stop and leaves another chat's run running", { timeout: 90_000 }, async () => {
    const markOwner = say(OWNER, "@Sleepers nap in the first chat");
    const markSecond = say(SECOND, "@Sleepers nap in the second chat");
    const ownerRun = runIdOf(await messageTo(OWNER, markOwner, /^Team \[Sleepers\] started/, "owner's start"));
    const secondRun = runIdOf(await messageTo(SECOND, markSecond, /^Team \[Sleepers\] started/, "second's start"));
    await until(() => (calls.filter((call) => call.role === "Sleeper").length >= 2 ? true : undefined), "both sleepers at the model");
    say(OWNER, "/stop");
    const cancelled = await messageTo(OWNER, markOwner, /^Background:/, "the cancellation in the first chat");
    expect(cancelled).toMatch(new RegExp(`^Background: Team \\[Sleepers\\] \\(run ID: ${ownerRun}\\) was cancelled\\.`));
    expect((await api<RunJson>(`/api/workflow-runs/${ownerRun}`)).body.nodes[0]?.status).toBe("cancelled");
    expect((await api<RunJson>(`/api/workflow-runs/${secondRun}`)).body.status).toBe("running");
    // The API reaches the worker running the other one.
    expect((await api<RunJson>(`/api/workflow-runs/${secondRun}/cancel`, { method: "POST" })).body.status).toBe("cancelled");
    await messageTo(SECOND, markSecond, /^Background: .* was cancelled/, "the cancellation in the second chat");
  });

  it("in a group starts a team only when the bot is addressed as the group policy requires", { timeout: 90_000 }, async () => {
    telegram.addChat({ id: GROUP, type: "supergroup", title: "Team room" });
    const mark = say(GROUP, "@Analysts group goal unaddressed", OWNER);
    say(GROUP, "@CountBot @Analysts group goal addressed", OWNER);
    await messageTo(GROUP, mark, /^Team \[Analysts\] started/, "the started reply in the group");
    await messageTo(GROUP, mark, /^Background:/, "the result in the group");
    const { body: runs } = await api<RunJson[]>(`/api/workflow-runs?chat=telegram:${GROUP}`);
    expect(runs.map((run) => run.goal)).toEqual(["group goal addressed"]);
  });

  it("survives SIGKILL of a worker mid-run: only the agents it was running run again", { timeout: 120_000 }, async () => {
    const mark = say(OWNER, "@Analysts crash drill");
    const runId = runIdOf(await messageTo(OWNER, mark, /^Team \[Analysts\] started/, "the started reply"));
    // The frontend analyst finishes; the other two hold their model calls.
    await until(async () => ((await api<RunJson>(`/api/workflow-runs/${runId}`)).body.nodes[0]?.status === "completed" ? true : undefined), "the frontend analyst to finish");
    await until(() => (calls.filter((call) => call.goal === "crash drill").length >= 3 ? true : undefined), "the held analysts at the model");
    const victim = workers.find((worker) => nodesStartedBy(worker, runId).some((node) => node === "backend" || node === "database"))!;
    const killedNodes = nodesStartedBy(victim, runId).filter((node) => node !== "frontend");
    await victim.stop("SIGKILL");
    // Its agents come back on the other worker (lock lapses, stalled check): their model calls arrive again.
    const roleOf = { backend: "Backend analyst", database: "Database expert" } as Record<string, string>;
    await until(() => (killedNodes.every((node) => calls.filter((call) => call.goal === "crash drill" && call.role === roleOf[node]).length >= 2) ? true : undefined), "the killed agents to run again");
    afterCrash.open();
    const result = await messageTo(OWNER, mark, /^Background: Team \[Analysts\]/, "the result after the crash");
    expect(result).toContain(`(run ID: ${runId}) completed.`);
    const drill = calls.filter((call) => call.goal === "crash drill");
    const count = (role: string) => drill.filter((call) => call.role === role).length;
    // The finished agent's model call is not repeated; only the killed worker's agents ran twice.
    expect(count("Frontend analyst")).toBe(1);
    for (const node of ["backend", "database"]) expect(count(roleOf[node]!)).toBe(killedNodes.includes(node) ? 2 : 1);
    expect(count("Architect")).toBe(1);
    const { body: run } = await api<RunJson>(`/api/workflow-runs/${runId}`);
    expect(run.nodes.map((node) => [node.id, node.status, node.attempts])).toEqual([
      ["frontend", "completed", 1],
      ["backend", "completed", killedNodes.includes("backend") ? 2 : 1],
      ["database", "completed", killedNodes.includes("database") ? 2 : 1],
      ["integrator", "completed", 1],
    ]);
  });
});
