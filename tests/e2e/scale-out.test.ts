/**
 * Scale-out as an operator runs it: gateways and two workers as real processes, each with its own
 * data directory and workspace (as on separate machines), sharing only one Redis. A fact the agent
 * saved to memory while worker A served the chat is there when worker B serves the next message;
 * the gateway's tool-history API shows both workers' calls; the audit log is the shared stream; a
 * web page that was offline during a reply, with its gateway restarted meanwhile, gets that reply
 * once; with two gateways, one page gets every final once, and its last `seq` resumes it exactly.
 */
import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const TOKEN = "scale-out-token-0123456789";
const CHAT = "ada";

interface Final {
  id: string;
  seq: string;
  content: string;
}

let root: string;
let prefix: string;
let llm: FakeOpenAIServer;
let redis: Redis;

/** The model: "remember: X" saves X with the memory tool, "what do you remember" reads memory, a tool result is repeated. */
function script(body: Record<string, unknown>) {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = messages.at(-1)!;
  if (last.role === "tool") return { text: `noted: ${String(last.content)}` };
  const text = String(last.content);
  const fact = /remember: (.+)/.exec(text)?.[1];
  if (fact) return { toolCalls: [{ name: "memory", arguments: JSON.stringify({ action: "append", content: fact }) }] };
  if (text.includes("what do you remember")) return { toolCalls: [{ name: "memory", arguments: JSON.stringify({ action: "read" }) }] };
  return { text: `echo: ${text}` };
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-scale-out-"));
  prefix = `countbot-scale-out-${randomUUID()}`;
  redis = new Redis(redisUrl);
  llm = await startFakeOpenAI({ script });
});

afterAll(async () => {
  await stopAllServices();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

/** A web page on one gateway: the finals it received, in order. */
async function openPage(base: string, after?: string): Promise<{ finals: Final[]; close(): void }> {
  const finals: Final[] = [];
  const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=${CHAT}${after ? `&after=${after}` : ""}`, { headers: { authorization: `Bearer ${TOKEN}` } });
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

async function until<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function filesUnder(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => path.relative(directory, path.join(entry.parentPath, entry.name)));
}

describe("scale-out: a chat's state follows it to any machine", () => {
  it("keeps memory, tool history, the audit log and waiting web replies in Redis", { timeout: 180_000 }, async () => {
    const configFile = path.join(root, "countbot.json");
    await writeFile(configFile, JSON.stringify({ redis: { leaseTtlMs: 2_000, prefix }, agent: { providerRetries: 0 } }));
    const shared = {
      HOME: root,
      REDIS_URL: redisUrl,
      COUNTBOT_CONFIG: configFile,
      COUNTBOT_API_PORT: "0",
      COUNTBOT_API_TOKEN: TOKEN,
      OPENAI_API_KEY: "sk-scale-out-0123456789",
      OPENAI_BASE_URL: llm.url,
      COUNTBOT_MODEL: "openai/fake-scripted",
      LOG_LEVEL: "info",
    };
    /** A process on a machine of its own: its own data directory and workspace. */
    const machine = async (name: string, command: "gateway" | "worker"): Promise<{ service: ServiceProcess; workspace: string }> => {
      const workspace = path.join(root, name, "workspace");
      await mkdir(workspace, { recursive: true });
      const service = startService([command], { ...shared, COUNTBOT_DATA_DIR: path.join(root, name, "data"), COUNTBOT_WORKSPACE: workspace });
      await service.waitForLog(command === "gateway" ? /gateway listening/ : /worker started/, 60_000);
      return { service, workspace };
    };
    const urlOf = async (gateway: ServiceProcess) => String((await gateway.waitForLog(/gateway listening/)).url);
    const post = async (base: string, content: string) => {
      const response = await fetch(`${base}/api/chat/${CHAT}/messages`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ content }),
      });
      expect(response.status).toBe(202);
    };

    const first = await machine("gateway-1", "gateway");
    const firstUrl = await urlOf(first.service);
    const page = await openPage(firstUrl);

    // Worker A serves the first message and saves a fact.
    const workerA = await machine("worker-a", "worker");
    await post(firstUrl, "remember: my cat is called Tom");
    const saved = await until("the first reply", () => page.finals[0]);
    expect(saved.content).toContain("noted: Appended a dated note to this chat's memory, redis:memory/chats/web%3Aada/MEMORY.md.");
    await workerA.service.stop("SIGTERM");

    // Worker B, with its own empty workspace, serves the next one and finds the fact.
    const workerB = await machine("worker-b", "worker");
    await post(firstUrl, "what do you remember?");
    const recalled = await until("the second reply", () => page.finals[1]);
    expect(recalled.content).toMatch(/^noted: ## \d{4}-\d\d-\d\d \d\d:\d\d UTC\n\nmy cat is called Tom/);
    // No memory file on either worker's disk: it is in Redis.
    for (const workspace of [workerA.workspace, workerB.workspace]) expect((await filesUnder(workspace)).filter((file) => file.includes("MEMORY"))).toEqual([]);
    // The prompt of B's turn carried the memory too.
    expect(JSON.stringify(llm.requests.at(-1)?.body.messages)).toContain("my cat is called Tom");

    // The gateway's tool history shows the calls both workers made.
    const response = await fetch(`${firstUrl}/api/sessions/web:${CHAT}/tool-history`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(response.status).toBe(200);
    const history = (await response.json()) as Array<{ tool: string; arguments: { action: string }; success: boolean }>;
    expect(history.map((entry) => [entry.tool, entry.arguments.action, entry.success])).toEqual([
      ["memory", "read", true],
      ["memory", "append", true],
    ]);
    // Both workers' calls went to the one audit stream.
    const audit = await redis.xrange(`{${prefix}}:audit`, "-", "+");
    expect(audit.map(([, fields]) => (JSON.parse(fields[1]!) as { arguments: { action: string } }).arguments.action)).toEqual(["append", "read"]);

    // The page goes offline; a reply comes while it is away; its gateway restarts.
    page.close();
    await post(firstUrl, "are you still there?");
    const log = `{${prefix}}:chat-events:web:${CHAT}:log`;
    await until("the third reply to be kept", async () => (await redis.xlen(log)) === 3);
    await first.service.stop("SIGTERM");
    const second = await machine("gateway-2", "gateway");
    const third = await machine("gateway-3", "gateway");
    const [secondUrl, thirdUrl] = [await urlOf(second.service), await urlOf(third.service)];

    // Back on another gateway without a token: the reply it missed, once.
    const back = await openPage(thirdUrl);
    await until("the missed reply", () => back.finals[0]);
    // Two gateways, one page: a message posted to the other gateway is answered on this socket, once.
    await post(secondUrl, "one more");
    await until("the next reply", () => back.finals[1]);
    // A later message's answer: a doubled final of the earlier ones would have come before it.
    await post(secondUrl, "settle");
    await until("the settling reply", () => back.finals.find((final) => final.content === "echo: settle"));
    expect(back.finals.map((final) => final.content)).toEqual(["echo: are you still there?", "echo: one more", "echo: settle"]);

    // Resuming from the first reply's seq on the other gateway: exactly what came after it.
    const resumed = await openPage(secondUrl, saved.seq);
    await until("the replies after the first", () => resumed.finals[3]);
    await post(secondUrl, "settle again");
    // Both pages are on that chat: each gets the settling reply, and nothing twice before it.
    for (const page of [resumed, back]) await until("the settling reply", () => page.finals.find((final) => final.content === "echo: settle again"));
    expect(resumed.finals.map((final) => final.id)).toEqual([recalled.id, ...back.finals.map((final) => final.id)]);
    back.close();
    resumed.close();

    await workerB.service.stop("SIGTERM");
    await second.service.stop("SIGTERM");
    await third.service.stop("SIGTERM");
  });
});
