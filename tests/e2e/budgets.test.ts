/**
 * Budgets end to end, as an operator runs them: a gateway (web chat) and two workers as processes
 * over real Redis, each worker with a fake OpenAI server of its own (so the test knows which worker
 * made a call) that reports usage. The fake servers count every token they served.
 * - A person with a 10,000-token daily budget sends 40 messages across 4 chats at once, each turn
 *   costing 1,500 tokens: at most ⌊10,000 / 1,500⌋ + 1 model calls are made for them, every
 *   message is answered (the refused ones with the budget's reply), their /usage equals what the
 *   fake servers served them, and another person's messages are answered as usual.
 * - A team run with a 2,000-token run budget stops at the budget: the run is failed with "budget
 *   exhausted" and the agents that finished keep their output.
 * - A worker SIGKILLed while its call holds a reservation: the reservation is released within its
 *   expiry and the person's budget shows exactly what was served afterwards.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createRedisBudgetLedger } from "../../src/store/redis-budget-ledger.js";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runCli } from "../support/run-cli.js";

const TOKEN = "budgets-e2e-token-0123456789";
const RESERVATION_TTL_MS = 3_000;
const PER_CALL = { promptTokens: 1_000, completionTokens: 500 };

let root: string;
let prefix: string;
let redis: Redis;
let base: string;
const servers: FakeOpenAIServer[] = [];
const workers: ServiceProcess[] = [];
/** Tokens the fake servers served, by the person named in the prompt. */
const served = new Map<string, number>();
/** Model calls the fake servers answered, by the person named in the prompt (and which server). */
const calls: Array<{ person: string; server: number }> = [];
const held: Array<() => void> = [];
let hangCarol = true;
let environment: (server: number) => Record<string, string>;

function script(server: number) {
  return (body: Record<string, unknown>): FakeOpenAIStep => {
    const messages = body.messages as Array<{ role: string; content: unknown }>;
    const system = String(messages[0]?.content ?? "");
    const text = JSON.stringify(messages.filter((message) => message.role === "user").at(-1)?.content ?? "");
    const role = /^You are (.+?), one agent/m.exec(system)?.[1];
    const person = role ? `team:${role}` : (/\b(alice|bob|carol)-/.exec(text)?.[1] ?? "other");
    calls.push({ person, server });
    served.set(person, (served.get(person) ?? 0) + PER_CALL.promptTokens + PER_CALL.completionTokens);
    if (person === "carol" && hangCarol) {
      hangCarol = false;
      // Streams a little, then holds the call open: the reservation stays held until the worker dies.
      return { text: "thinking", usage: PER_CALL, holdUntil: new Promise<void>((resolve) => held.push(resolve)) };
    }
    return { text: role ? `${role} output` : "ok", usage: PER_CALL };
  };
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-budgets-"));
  prefix = `countbot-budgets-${randomUUID()}`;
  redis = new Redis(redisUrl);
  servers.push(await startFakeOpenAI({ script: script(0) }), await startFakeOpenAI({ script: script(1) }));
  const configFile = path.join(root, "countbot.json");
  await writeFile(
    configFile,
    JSON.stringify({
      redis: { prefix, leaseTtlMs: 2_000 },
      jobs: { lockDurationMs: 2_000, stalledIntervalMs: 1_000 },
      agent: { providerRetries: 0, maxTokens: 1_000 },
      shutdownGraceMs: 1_000,
      budgets: { person: { limit: 10_000, period: "day" }, teamRun: { limit: 2_000 }, reservationTtlMs: RESERVATION_TTL_MS },
      teams: {
        Writers: {
          mode: "pipeline",
          agents: [
            { id: "outline", role: "Outliner", task: "outline it" },
            { id: "draft", role: "Drafter", task: "draft it" },
            { id: "polish", role: "Polisher", task: "polish it" },
          ],
        },
      },
    }),
  );
  const env = (server: number) => ({
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: path.join(root, `data-${server}`),
    COUNTBOT_API_PORT: "0",
    COUNTBOT_API_TOKEN: TOKEN,
    OPENAI_API_KEY: "sk-budgets-0123456789",
    OPENAI_BASE_URL: servers[server]!.url,
    COUNTBOT_MODEL: "openai/fake-budget-model",
    LOG_LEVEL: "info",
  });
  environment = env;
  const gateway = startService(["gateway"], env(0));
  base = String((await gateway.waitForLog(/gateway listening/)).url);
  workers.push(startService(["worker"], env(0)), startService(["worker"], env(1)));
  await Promise.all(workers.map((worker) => worker.waitForLog(/worker started/)));
}, 90_000);

afterAll(async () => {
  for (const release of held) release();
  await stopAllServices();
  await Promise.all(servers.map((server) => server.close()));
  await deleteKeys(redis, prefix);
  await redis?.quit();
  await rm(root, { recursive: true, force: true });
});

interface Final {
  content: string;
  answers: string[];
}

/** A web page on a chat: the finals it received. */
async function openPage(chatId: string): Promise<{ finals: Final[]; close(): void }> {
  const finals: Final[] = [];
  const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=${chatId}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  socket.on("message", (data) => {
    const event = JSON.parse(String(data)) as { type: string } & Final;
    if (event.type === "message") finals.push(event);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  return { finals, close: () => socket.close() };
}

async function post(chatId: string, senderId: string, content: string): Promise<string> {
  const response = await fetch(`${base}/api/chat/${chatId}/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ content, senderId }),
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { id: string }).id;
}

async function until<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const answered = (pages: Array<{ finals: Final[] }>, ids: string[]) => ids.every((id) => pages.some((page) => page.finals.some((final) => final.answers.includes(id))));
const tokensIn = (usage: string) => Number(/You \([^)]+\): ([\d,]+) tokens of/.exec(usage)?.[1]?.replaceAll(",", "") ?? Number.NaN);
const BUDGET_REPLY = /^(Sorry, I can't answer this: your daily budget is used up \([\d,]+ tokens of 10,000 tokens\)\. It renews at|Budget used up \(your daily budget: [\d,]+ tokens of 10,000 tokens; renews)/;

describe("budgets over Redis with two workers", () => {
  it("spends a person's daily budget to its limit and not past one call, answers every message, and leaves others alone", { timeout: 180_000 }, async () => {
    const chats = ["a1", "a2", "a3", "a4"];
    const pages = await Promise.all([...chats, "b1"].map((chat) => openPage(chat)));
    // Messages of one chat that arrive together are one turn (the bus coalesces a burst), so the 40
    // come in four waves of ten at once over the four chats: at least 16 turns of 1,500 tokens, more
    // than the budget holds, each wave racing over both workers.
    const aliceIds: string[] = [];
    const bobIds: string[] = [];
    for (let wave = 0; wave < 4; wave++) {
      const posts = Array.from({ length: 10 }, (_, index) => post(chats[index % 4]!, "alice", `alice-${wave * 10 + index} hello`));
      const bobPost = post("b1", "bob", `bob-${wave} hi`);
      const ids = await Promise.all(posts);
      aliceIds.push(...ids);
      bobIds.push(await bobPost);
      await until(`wave ${wave + 1} answered`, () => answered(pages, [...aliceIds, ...bobIds]), 120_000);
    }

    const aliceCalls = calls.filter((call) => call.person === "alice").length;
    expect(aliceCalls).toBeGreaterThanOrEqual(1);
    expect(aliceCalls).toBeLessThanOrEqual(Math.floor(10_000 / 1_500) + 1);
    // The budget was spent, not refused early: used up means at least 10,000 served.
    expect(served.get("alice")).toBeGreaterThanOrEqual(10_000);
    const aliceFinals = pages.slice(0, 4).flatMap((page) => page.finals);
    const refused = aliceFinals.filter((final) => final.content !== "ok");
    expect(refused.length).toBeGreaterThan(0);
    for (const final of refused) expect(final.content).toMatch(BUDGET_REPLY);
    expect(aliceFinals.filter((final) => final.content.startsWith("Sorry, I can't answer this"))).toHaveLength(1);
    // Bob is untouched: every one of his messages was answered by the model.
    expect(pages[4]!.finals.length).toBeGreaterThan(0);
    for (const final of pages[4]!.finals) expect(final.content).toBe("ok");

    const before = pages[0]!.finals.length;
    await post("a1", "alice", "/usage");
    const usage = await until("alice's /usage", () => pages[0]!.finals[before]?.content);
    expect(tokensIn(usage)).toBe(served.get("alice"));
    pages.forEach((page) => page.close());

    // The API and the CLI tell the same from the usage report, once the workers have flushed their
    // counts (each sums its calls' and adds them to Redis within 5 seconds).
    const aliceRow = async () => {
      const response = await fetch(`${base}/api/usage?by=person&period=day`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const report = (await response.json()) as { rows: Array<{ key: string; tokens: number; calls: number }> };
      return report.rows.find((row) => row.key === "web:alice");
    };
    const flushed = await until("alice's usage report flushed", async () => {
      const row = await aliceRow();
      return row?.calls === aliceCalls && row;
    }, 30_000);
    expect(flushed).toMatchObject({ tokens: served.get("alice"), calls: aliceCalls });
    const cli = await runCli(["usage", "--by", "person", "--json", "--person", "web:alice"], { env: environment(0) });
    expect(cli.code, cli.stderr).toBe(0);
    const printed = JSON.parse(cli.stdout) as { rows: Array<{ key: string; tokens: number }>; budgets: Array<{ kind: string; used: number; limit: number }> };
    expect(printed.rows.find((row) => row.key === "web:alice")?.tokens).toBe(served.get("alice"));
    expect(printed.budgets).toEqual([expect.objectContaining({ kind: "person", used: served.get("alice"), limit: 10_000 })]);
  });

  it("stops a team run at its run budget and keeps what its finished agents wrote", { timeout: 120_000 }, async () => {
    const started = await fetch(`${base}/api/workflow-runs`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ team: "Writers", goal: "a short story" }),
    });
    expect(started.status).toBe(201);
    const { id } = (await started.json()) as { id: string };
    const run = await until("the run to end", async () => {
      const response = await fetch(`${base}/api/workflow-runs/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const body = (await response.json()) as { status: string; error: string | null; result: string | null; nodes: Array<{ id: string; status: string; output?: string | null; error: string | null }> };
      return body.status === "running" ? undefined : body;
    });
    expect(run.status).toBe("failed");
    expect(run.error).toMatch(/^budget exhausted: Budget used up \(the team run's budget: 3,000 tokens of 2,000 tokens\)/);
    // 1,500 per agent: the outliner leaves room, the drafter takes it past the limit, the polisher is refused.
    expect(run.nodes.map((node) => [node.id, node.status, node.output ?? null])).toEqual([
      ["outline", "completed", "Outliner output"],
      ["draft", "completed", "Drafter output"],
      ["polish", "failed", null],
    ]);
    expect(run.result).toContain("Outliner output");
    expect(run.result).toContain("Drafter output");
    expect(calls.filter((call) => call.person === "team:Polisher")).toEqual([]);
  });

  it("releases the reservation of a worker killed mid-call within its expiry, and the budget counts what was served", { timeout: 120_000 }, async () => {
    const page = await openPage("k1");
    const id = await post("k1", "carol", "carol-1 think hard");
    const hanging = await until("carol's call to hang", () => calls.find((call) => call.person === "carol"));
    const ledger = createRedisBudgetLedger({ redis, prefix });
    const day = new Date();
    const from = Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate());
    const carol = { scope: "person:web:carol", unit: "tokens" as const, limit: 10_000, from, bucket: from, keepMs: 86_400_000 };
    expect((await ledger.read([carol], Date.now()))[0]!.held).toBeGreaterThan(0);

    await workers[hanging.server]!.stop("SIGKILL");
    const killedAt = Date.now();
    // The other worker takes the chat over once the lease expires and answers from its own server.
    await until("carol's answer", () => page.finals.some((final) => final.answers.includes(id)));
    expect(page.finals.find((final) => final.answers.includes(id))!.content).toBe("ok");
    await until("the dead worker's reservation to expire", () => Date.now() >= killedAt + RESERVATION_TTL_MS);
    const state = (await ledger.read([carol], Date.now()))[0]!;
    expect(state.held).toBe(0);
    // The killed call never reported its usage: the budget holds the call that finished.
    expect(state.used).toBe(PER_CALL.promptTokens + PER_CALL.completionTokens);
    page.close();
  });
});
