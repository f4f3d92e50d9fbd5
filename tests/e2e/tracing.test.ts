/**
 * Tracing across processes, as an operator turns it on: a gateway and a worker (separate
 * processes over one Redis) with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a fake OTLP collector.
 * One web message makes one trace holding both processes' spans: the gateway's inbound span, the
 * worker's bus wait and turn under it, the model calls (with token usage) and the tool call under
 * the turn, and the gateway's delivery of the reply under the turn again. Log lines written inside
 * a span carry its trace id; no span carries the message's text.
 */
import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type CollectedSpan, type FakeOtlpCollector, startFakeOtlpCollector } from "../support/fake-otlp-collector.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const TOKEN = "tracing-token-0123456789";
const CHAT = "grace";
const SECRET_TEXT = "my locker code is 4711";

let root: string;
let prefix: string;
let llm: FakeOpenAIServer;
let collector: FakeOtlpCollector;
let redis: Redis;

/** The model reads memory once (a tool call), then answers; each call reports its token usage. */
function script(body: Record<string, unknown>) {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = messages.at(-1)!;
  if (last.role === "tool") return { text: "done reading", usage: { promptTokens: 120, completionTokens: 7 } };
  return { toolCalls: [{ name: "memory", arguments: JSON.stringify({ action: "read" }) }], usage: { promptTokens: 100, completionTokens: 12 } };
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-tracing-"));
  prefix = `countbot-tracing-${randomUUID()}`;
  redis = new Redis(redisUrl);
  llm = await startFakeOpenAI({ script });
  collector = await startFakeOtlpCollector();
});

afterAll(async () => {
  await stopAllServices();
  await llm?.close();
  await collector?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

/** A web page on the gateway: the finals it received; `delivered` resolves with the first. */
async function openPage(base: string): Promise<{ finals: string[]; delivered: Promise<void>; close(): void }> {
  const finals: string[] = [];
  const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=${CHAT}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const delivered = new Promise<void>((resolve) =>
    socket.on("message", (data) => {
      const event = JSON.parse(String(data)) as { type: string; content: string };
      if (event.type !== "message") return;
      finals.push(event.content);
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  return { finals, delivered, close: () => socket.close() };
}

/** The trace that holds a span of each name, from the service each is expected in. */
function traceWith(spans: CollectedSpan[], wanted: Array<[service: string, name: string]>): CollectedSpan[] | undefined {
  for (const traceId of new Set(spans.map((span) => span.traceId))) {
    const trace = spans.filter((span) => span.traceId === traceId);
    if (wanted.every(([service, name]) => trace.some((span) => span.service === service && span.name === name))) return trace;
  }
  return undefined;
}

describe("tracing: one trace follows a web message through the gateway, Redis and a worker", () => {
  it("exports spans of both processes in one trace, with token usage, delivery and the trace id in the logs", { timeout: 180_000 }, async () => {
    const configFile = path.join(root, "countbot.json");
    await writeFile(configFile, JSON.stringify({ redis: { prefix }, agent: { providerRetries: 0 } }));
    const shared = {
      HOME: root,
      REDIS_URL: redisUrl,
      COUNTBOT_CONFIG: configFile,
      COUNTBOT_API_PORT: "0",
      COUNTBOT_API_TOKEN: TOKEN,
      OPENAI_API_KEY: "sk-tracing-0123456789",
      OPENAI_BASE_URL: llm.url,
      COUNTBOT_MODEL: "openai/fake-scripted",
      LOG_LEVEL: "debug",
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "100",
    };
    const start = async (command: "gateway" | "worker"): Promise<ServiceProcess> => {
      const workspace = path.join(root, command, "workspace");
      await mkdir(workspace, { recursive: true });
      const service = startService([command], { ...shared, COUNTBOT_DATA_DIR: path.join(root, command, "data"), COUNTBOT_WORKSPACE: workspace });
      await service.waitForLog(command === "gateway" ? /gateway listening/ : /worker started/, 60_000);
      return service;
    };
    const gateway = await start("gateway");
    const worker = await start("worker");
    expect(String((await gateway.waitForLog(/tracing on/)).service)).toBe("countbot-gateway");
    expect(String((await worker.waitForLog(/tracing on/)).service)).toBe("countbot-worker");
    const base = String((await gateway.waitForLog(/gateway listening/)).url);
    const page = await openPage(base);

    const response = await fetch(`${base}/api/chat/${CHAT}/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ content: SECRET_TEXT }),
    });
    expect(response.status).toBe(202);
    await page.delivered;
    expect(page.finals).toEqual(["done reading"]);
    page.close();

    const trace = await collector.waitFor("one trace with the gateway's and the worker's spans", (spans) => {
      const found = traceWith(spans, [
        ["countbot-gateway", "inbound web"],
        ["countbot-worker", "bus wait"],
        ["countbot-worker", "turn"],
        ["countbot-worker", "chat fake-scripted"],
        ["countbot-worker", "execute_tool memory"],
        ["countbot-gateway", "deliver web"],
      ]);
      // The tool's notice is delivered too: wait for the final reply's delivery.
      return found?.some((span) => span.name === "deliver web" && span.attributes["countbot.kind"] === "final") ? found : undefined;
    });
    const named = (name: string) => trace.filter((span) => span.name === name);
    const inbound = named("inbound web")[0]!;
    const turn = named("turn")[0]!;
    expect(inbound.parentSpanId).toBeUndefined();
    expect(inbound.attributes).toMatchObject({ "countbot.channel": "web", "countbot.session": `web:${CHAT}`, "countbot.outcome": "published" });
    // The worker continues the gateway's span, through Redis.
    expect(named("bus wait")[0]!.parentSpanId).toBe(inbound.spanId);
    expect(turn.parentSpanId).toBe(inbound.spanId);
    expect(turn.attributes).toMatchObject({ "countbot.session": `web:${CHAT}`, "countbot.outcome": "answered", "countbot.messages": 1 });
    // Two model calls under the turn, each with its usage; the tool call between them.
    const calls = named("chat fake-scripted");
    expect(calls).toHaveLength(2);
    for (const call of calls) expect(call.parentSpanId).toBe(turn.spanId);
    expect(calls.map((call) => [call.attributes["gen_ai.usage.input_tokens"], call.attributes["gen_ai.usage.output_tokens"]]).sort()).toEqual([
      [100, 12],
      [120, 7],
    ]);
    expect(calls[0]!.attributes).toMatchObject({ "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "fake-scripted" });
    const tool = named("execute_tool memory")[0]!;
    expect(tool.parentSpanId).toBe(turn.spanId);
    expect(tool.attributes).toMatchObject({ "gen_ai.tool.name": "memory", "countbot.tool.success": true });
    // The reply's delivery, back in the gateway, hangs under the turn that wrote it.
    const delivery = named("deliver web").find((span) => span.attributes["countbot.kind"] === "final")!;
    expect(delivery.parentSpanId).toBe(turn.spanId);
    expect(delivery.attributes["countbot.chunks_sent"]).toBe(1);
    // No span says what the person wrote.
    expect(JSON.stringify(collector.spans)).not.toContain("locker");

    // Both processes' log lines written inside the trace name it.
    const traced = (service: ServiceProcess) =>
      service
        .output()
        .split("\n")
        .filter((line) => line.includes(`"trace_id":"${inbound.traceId}"`));
    expect(traced(gateway).length).toBeGreaterThan(0);
    expect(traced(worker).length).toBeGreaterThan(0);

    await gateway.stop("SIGTERM");
    await worker.stop("SIGTERM");
  });
});
