/**
 * Graceful shutdown of a worker over Redis: SIGTERM mid-turn lets the turn finish (within the
 * grace period) and the reply is delivered; a turn longer than the grace period is handed back and
 * answered by the next worker, not cut off with "[stopped]".
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const TOKEN = "shutdown-test-token-0123456789";
let root: string;
let prefix: string;
let llm: FakeOpenAIServer;
let redis: Redis;
let delayMs = 1_500;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-shutdown-"));
  prefix = `countbot-shutdown-${randomUUID()}`;
  redis = new Redis(redisUrl);
  llm = await startFakeOpenAI({ script: () => ({ text: "finished properly", delayMs }) });
});
afterAll(async () => {
  await stopAllServices();
  await llm.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

async function setup(graceMs: number) {
  const configFile = path.join(root, `config-${graceMs}.json`);
  await writeFile(configFile, JSON.stringify({ redis: { prefix, leaseTtlMs: 3_000 }, shutdownGraceMs: graceMs, agent: { providerRetries: 0 } }));
  const env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    COUNTBOT_API_TOKEN: TOKEN,
    OPENAI_API_KEY: "sk-shutdown-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  const gateway = startService(["gateway"], env);
  const base = String((await gateway.waitForLog(/gateway listening/)).url);
  const chatId = `chat-${randomUUID().slice(0, 8)}`;
  const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=${chatId}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const finals: string[] = [];
  socket.on("message", (data) => {
    const event = JSON.parse(String(data)) as { type: string; content: string };
    if (event.type === "message") finals.push(event.content);
  });
  await new Promise((resolve) => socket.once("open", resolve));
  const send = () =>
    fetch(`${base}/api/chat/${chatId}/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ content: "a job" }),
    });
  return { env, gateway, socket, finals, send };
}

async function until(condition: () => boolean, what: string, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("worker shutdown", () => {
  it("finishes the running turn on SIGTERM and exits 0", { timeout: 60_000 }, async () => {
    delayMs = 1_500;
    const { env, gateway, socket, finals, send } = await setup(10_000);
    const worker = startService(["worker"], env);
    await worker.waitForLog(/worker started/);
    const requestsBefore = llm.requests.length;
    await send();
    await until(() => llm.requests.length > requestsBefore, "the model call");
    expect(await worker.stop("SIGTERM")).toBe(0);
    await until(() => finals.length === 1, "the reply");
    expect(finals).toEqual(["finished properly"]);
    socket.close();
    await gateway.stop();
  });

  it("hands a turn longer than the grace period to the next worker", { timeout: 60_000 }, async () => {
    delayMs = 4_000;
    const { env, gateway, socket, finals, send } = await setup(200);
    const first = startService(["worker"], env);
    await first.waitForLog(/worker started/);
    const requestsBefore = llm.requests.length;
    await send();
    await until(() => llm.requests.length > requestsBefore, "the model call");
    expect(await first.stop("SIGTERM")).toBe(0);
    delayMs = 0;
    const second = startService(["worker"], env);
    await until(() => finals.length === 1, "the reply from the second worker");
    expect(finals).toEqual(["finished properly"]);
    await second.stop();
    socket.close();
    await gateway.stop();
  });
});
