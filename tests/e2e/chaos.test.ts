/**
 * Chaos: a gateway and two workers as real processes on real Redis, a fake LLM that takes a moment
 * per call. 100 chats send 5 messages each in bursts through the web channel; one worker is
 * killed with SIGKILL mid-turn. Every message must be answered, each exactly once, in order per
 * chat, and no reply may be delivered twice. Run on one Redis (REDIS_URL) and on a Redis Cluster
 * of three shards of the test's own (`redis.cluster`).
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
import { type OwnCluster, startRedisCluster } from "../support/redis-cluster.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const CHATS = 100;
const MESSAGES_PER_CHAT = 5;
const TOKEN = "chaos-test-token-0123456789";

interface Final {
  id: string;
  content: string;
  answers: string[];
}

let root: string;
let prefix: string;
let llm: FakeOpenAIServer;
let redis: Redis;
let cluster: OwnCluster | undefined;
/** Model calls in flight, by the API key that made them (each worker has its own). */
const inFlight = new Map<string, number>();

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-chaos-"));
  prefix = `countbot-chaos-${randomUUID()}`;
  redis = new Redis(redisUrl);
  llm = await startFakeOpenAI({
    script: (body, index) => {
      const messages = body.messages as Array<{ role: string; content: unknown }>;
      const last = [...messages].reverse().find((message) => message.role === "user");
      const key = String(llm.requests[index]?.headers.authorization ?? "");
      inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
      setTimeout(() => inFlight.set(key, inFlight.get(key)! - 1), 150);
      return { text: `echo: ${String(last?.content)}`, delayMs: 150 };
    },
  });
});

afterAll(async () => {
  await stopAllServices();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await cluster?.stop();
  await rm(root, { recursive: true, force: true });
});

describe.each([
  { topology: "one Redis", clustered: false },
  // Partitioned (redis.partitions: 6): the chats' keys spread over the three shards.
  { topology: "a Redis Cluster of three shards, the bus in 6 partitions", clustered: true },
])("chaos: SIGKILL a worker mid-turn, on $topology", ({ clustered }) => {
  it("answers every message exactly once, in order per chat", { timeout: 150_000 }, async () => {
    cluster = clustered ? await startRedisCluster(3) : undefined;
    const configFile = path.join(root, clustered ? "countbot-cluster.json" : "countbot.json");
    const env = {
      HOME: root,
      // With redis.cluster, the URL only switches Redis on: the nodes come from the config.
      REDIS_URL: cluster ? `redis://127.0.0.1:${cluster.nodes[0]!.port}` : redisUrl,
      COUNTBOT_CONFIG: configFile,
      COUNTBOT_DATA_DIR: path.join(root, "data"),
      COUNTBOT_API_PORT: "0",
      COUNTBOT_API_TOKEN: TOKEN,
      OPENAI_API_KEY: "sk-chaos-gateway",
      OPENAI_BASE_URL: llm.url,
      COUNTBOT_MODEL: "openai/fake-echo",
      LOG_LEVEL: "info",
    };
    // Every process shares this test's key prefix; a short lease makes the takeover quick.
    await writeFile(
      configFile,
      JSON.stringify({ redis: { leaseTtlMs: 2_000, prefix, ...(cluster ? { cluster: cluster.nodes, partitions: 6 } : {}) }, agent: { providerRetries: 0 }, tools: { audit: { enabled: false } } }),
    );

    const gateway = startService(["gateway"], env);
    const listening = await gateway.waitForLog(/gateway listening/);
    const base = String(listening.url);
    // Each worker its own API key, so the fake model knows whose calls are in flight.
    const keys = ["sk-chaos-worker-0", "sk-chaos-worker-1"];
    const workers: ServiceProcess[] = keys.map((key) => startService(["worker"], { ...env, OPENAI_API_KEY: key }));
    await Promise.all(workers.map((worker) => worker.waitForLog(/worker started/)));

    const finals = new Map<string, Final[]>();
    const sockets: WebSocket[] = [];
    await Promise.all(
      Array.from({ length: CHATS }, async (_, index) => {
        const chatId = `chat-${index}`;
        finals.set(chatId, []);
        const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=${chatId}`, { headers: { authorization: `Bearer ${TOKEN}` } });
        socket.on("message", (data) => {
          const event = JSON.parse(String(data)) as { type: string } & Final;
          if (event.type === "message") finals.get(chatId)!.push(event);
        });
        await new Promise<void>((resolve, reject) => {
          socket.once("open", () => resolve());
          socket.once("error", reject);
        });
        sockets.push(socket);
      }),
    );

    const sent = new Map<string, string[]>();
    let killed = false;
    // The worker killed is the one with more model calls in flight: it holds chats mid-turn, so
    // the survivor has interrupted turns to take over. A worker that happened to hold none when
    // killed would prove nothing; while neither has a call in flight, the kill waits.
    let victim = 0;
    const callsOf = (worker: number) => inFlight.get(`Bearer ${keys[worker]}`) ?? 0;
    const killBusiest = async () => {
      if (killed || callsOf(0) + callsOf(1) === 0) return;
      killed = true;
      victim = callsOf(0) >= callsOf(1) ? 0 : 1;
      await workers[victim]!.stop("SIGKILL");
    };
    const send = async (chatId: string, content: string) => {
      const response = await fetch(`${base}/api/chat/${chatId}/messages`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ content }),
      });
      expect(response.status).toBe(202);
      const { id } = (await response.json()) as { id: string };
      sent.get(chatId)!.push(id);
    };
    const answeredCount = () => [...finals.values()].reduce((total, list) => total + list.reduce((sum, final) => sum + final.answers.length, 0), 0);

    // Bursts: every chat sends its five messages back to back; chats go in parallel.
    await Promise.all(
      Array.from({ length: CHATS }, async (_, index) => {
        const chatId = `chat-${index}`;
        sent.set(chatId, []);
        for (let message = 0; message < MESSAGES_PER_CHAT; message += 1) {
          await send(chatId, `chat ${index} message ${message}`);
          if (!killed && answeredCount() >= 40) await killBusiest();
        }
      }),
    );
    const deadline = Date.now() + 90_000;
    while (!killed && Date.now() < deadline) {
      if (answeredCount() >= 40) await killBusiest();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const total = CHATS * MESSAGES_PER_CHAT;
    while (answeredCount() < total && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));

    for (const socket of sockets) socket.close();
    expect(killed).toBe(true);

    const allFinalIds = [...finals.values()].flat().map((final) => final.id);
    expect(new Set(allFinalIds).size).toBe(allFinalIds.length);
    for (const [chatId, ids] of sent) {
      const answered = finals.get(chatId)!.flatMap((final) => final.answers);
      // Each message answered exactly once, in the order it was sent.
      expect(answered, `answers in ${chatId}`).toEqual(ids);
      for (const final of finals.get(chatId)!) expect(final.content).toContain("echo:");
    }
    expect(answeredCount()).toBe(total);
    // The survivor really took over turns the killed worker had started.
    const survivor = workers[1 - victim]!;
    await survivor.waitForLog(/re-running a turn that was interrupted/, 1_000);
    if (cluster) {
      // The chats' history lives in their partitions, and the partitions on more than one shard.
      const shardsWithChats = await Promise.all(
        cluster.nodes.map(async (node) => {
          const shard = new Redis(node.port, node.host);
          try {
            const [, keys] = await shard.scan("0", "MATCH", `{${prefix}:p*}:session:*`, "COUNT", 10_000);
            return keys.length > 0;
          } finally {
            shard.disconnect();
          }
        }),
      );
      expect(shardsWithChats.filter(Boolean).length).toBeGreaterThan(1);
    }
    await survivor.stop("SIGTERM");
    await gateway.stop("SIGTERM");
    await cluster?.stop();
    cluster = undefined;
  });
});
