/**
 * Redis dying mid-flight: a gateway and two workers as real processes on a redis-server of the
 * test's own (AOF on, fsync always, its own port and directory). While dozens of web chats post a
 * few hundred messages, Redis is killed with SIGKILL and restarted several times, once for longer
 * than the lease; the clients retry what was not accepted with the same clientMessageId. Every
 * accepted message must be answered exactly once, in order per chat, no reply delivered twice, no
 * "[stopped]" in any history; /ready says not ready while Redis is away; the processes reconnect by
 * themselves. The races are intermittent, so the whole round runs several times.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { type OwnRedis, startRedisServer } from "../support/redis-server.js";

const RUNS = 3;
const CHATS = 24;
const MESSAGES_PER_CHAT = 10;
const LEASE_TTL_MS = 2_000;
const TOKEN = "redis-faults-token-0123456789";
/** Up, then down for this long; one outage outlasts the lease. */
const OUTAGES = [
  { afterMs: 400, downMs: 300 },
  { afterMs: 700, downMs: 1_000 },
  { afterMs: 700, downMs: LEASE_TTL_MS + 1_500 },
  { afterMs: 700, downMs: 200 },
];

let root: string;
let prefix: string;
let llm: FakeOpenAIServer;
let redisServer: OwnRedis;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-redis-faults-"));
  prefix = `countbot-faults-${randomUUID()}`;
  redisServer = await startRedisServer(["--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"]);
  llm = await startFakeOpenAI({
    script: (body) => {
      const messages = body.messages as Array<{ role: string; content: unknown }>;
      const last = [...messages].reverse().find((message) => message.role === "user");
      return { text: `echo: ${String(last?.content)}`, delayMs: 40 };
    },
  });
});

afterAll(async () => {
  await stopAllServices();
  await llm?.close();
  await redisServer?.stop();
  await rm(root, { recursive: true, force: true });
});

describe("Redis killed and restarted under load", () => {
  it(`answers every accepted message exactly once, in order, over ${RUNS} rounds of kill -9`, { timeout: 110_000 }, async () => {
    const configFile = path.join(root, "countbot.json");
    const env = {
      HOME: root,
      REDIS_URL: redisServer.url,
      COUNTBOT_CONFIG: configFile,
      COUNTBOT_DATA_DIR: path.join(root, "data"),
      COUNTBOT_WORKSPACE: path.join(root, "workspace"),
      COUNTBOT_API_PORT: "0",
      COUNTBOT_API_TOKEN: TOKEN,
      OPENAI_API_KEY: "sk-faults-0123456789",
      OPENAI_BASE_URL: llm.url,
      COUNTBOT_MODEL: "openai/fake-echo",
      LOG_LEVEL: "info",
    };
    await writeFile(configFile, JSON.stringify({ redis: { leaseTtlMs: LEASE_TTL_MS, prefix }, agent: { providerRetries: 0 }, tools: { audit: { enabled: false } } }));

    const gateway = startService(["gateway"], env);
    const base = String((await gateway.waitForLog(/gateway listening/)).url);
    const workers: ServiceProcess[] = [startService(["worker"], env), startService(["worker"], env)];
    await Promise.all(workers.map((worker) => worker.waitForLog(/worker started/)));

    let readyDuringOutage: number | undefined;
    for (let run = 0; run < RUNS; run += 1) {
      const outcome = await oneRound(base, run, async () => {
        for (const [index, outage] of OUTAGES.entries()) {
          await sleep(outage.afterMs);
          await redisServer.kill();
          if (index === 2) readyDuringOutage = (await fetch(`${base}/ready`).catch(() => undefined))?.status;
          await sleep(outage.downMs);
          await redisServer.restart();
        }
      });
      // On failure, what each unanswered chat sent and got (an apology instead of an echo, or nothing).
      const missing = outcome.unanswered.map((chatId) => ({ chatId, ...outcome.chats.get(chatId)! }));
      expect(missing, `round ${run}: chats with answers missing`).toEqual([]);
      for (const [chatId, chat] of outcome.chats) {
        // Each accepted message answered exactly once, in the order it was sent.
        expect(chat.answered, `round ${run}, ${chatId}`).toEqual(chat.accepted);
        expect(new Set(chat.finalIds).size, `round ${run}, ${chatId}: a reply delivered twice`).toBe(chat.finalIds.length);
        for (const content of chat.contents) expect(content).toMatch(/^echo: /);
      }
      expect(outcome.refusals, `round ${run}: POSTs refused while Redis was away`).toBeGreaterThan(0);
    }
    expect(readyDuringOutage).toBe(503);
    expect((await fetch(`${base}/ready`)).status).toBe(200);

    // No "[stopped]" saved as an answer anywhere (a turn cut off by a lost lease writes nothing).
    const redis = new Redis(redisServer.url);
    try {
      const histories = await redis.keys(`{${prefix}}:session:*:history`);
      expect(histories.length).toBe(RUNS * CHATS);
      for (const key of histories) {
        for (const raw of await redis.lrange(key, 0, -1)) expect(raw, key).not.toContain("[stopped]");
      }
    } finally {
      redis.disconnect();
    }
    // The processes outlived every outage by reconnecting on their own.
    for (const service of [gateway, ...workers]) expect(service.child.exitCode).toBeNull();
    await Promise.all([...workers, gateway].map((service) => service.stop("SIGTERM")));
  });
});

interface ChatOutcome {
  accepted: string[];
  answered: string[];
  finalIds: string[];
  contents: string[];
}

/** Dozens of chats post their messages while `faults` runs; resolves once every accepted message is answered (or a deadline passes). */
async function oneRound(base: string, run: number, faults: () => Promise<void>): Promise<{ chats: Map<string, ChatOutcome>; unanswered: string[]; refusals: number }> {
  const chats = new Map<string, ChatOutcome>();
  const sockets: WebSocket[] = [];
  let refusals = 0;
  await Promise.all(
    Array.from({ length: CHATS }, async (_, index) => {
      const chatId = `round-${run}-chat-${index}`;
      const chat: ChatOutcome = { accepted: [], answered: [], finalIds: [], contents: [] };
      chats.set(chatId, chat);
      const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=${chatId}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      socket.on("message", (data) => {
        const event = JSON.parse(String(data)) as { type: string; id: string; content: string };
        if (event.type !== "message") return;
        chat.finalIds.push(event.id);
        chat.contents.push(event.content);
        chat.answered.push(...(event.content.match(/r\d+c\d+m\d+/g) ?? []));
      });
      await new Promise<void>((resolve, reject) => {
        socket.once("open", () => resolve());
        socket.once("error", reject);
      });
      sockets.push(socket);
    }),
  );

  /** Posts until Redis has it: 202, or 200 for a retry that had landed after all. */
  const post = async (chatId: string, token: string) => {
    for (;;) {
      const response = await fetch(`${base}/api/chat/${chatId}/messages`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ content: `please answer ${token}`, clientMessageId: token }),
      }).catch(() => undefined);
      if (response?.status === 202 || response?.status === 200) return;
      if (response && response.status < 500) throw new Error(`POST ${token} answered ${response.status}: ${await response.text()}`);
      refusals += 1;
      await sleep(100);
    }
  };

  const sending = Promise.all(
    [...chats.keys()].map(async (chatId, index) => {
      for (let message = 0; message < MESSAGES_PER_CHAT; message += 1) {
        const token = `r${run}c${index}m${message}`;
        await post(chatId, token);
        chats.get(chatId)!.accepted.push(token);
        await sleep(150 + ((index * 37 + message * 53) % 150));
      }
    }),
  );
  await Promise.all([sending, faults()]);

  const complete = (chat: ChatOutcome) => chat.answered.length >= chat.accepted.length;
  const deadline = Date.now() + 30_000;
  while ([...chats.values()].some((chat) => !complete(chat)) && Date.now() < deadline) await sleep(100);
  // A moment more, so a reply delivered twice would show.
  await sleep(300);
  for (const socket of sockets) socket.close();
  return { chats, unanswered: [...chats].filter(([, chat]) => !complete(chat)).map(([chatId]) => chatId), refusals };
}
