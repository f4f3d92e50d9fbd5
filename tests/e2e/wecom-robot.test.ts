/**
 * WeCom end to end, the intelligent robot: WeCom's SDK inside gateway processes dials the fake long
 * connection; a worker process and real Redis; a fake LLM. Replies stream into one `stream`
 * message updated in place and finished with the final text.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type AibotStream, type FakeAibot, startFakeAibot } from "../support/fake-wecom-aibot.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const BOT_ID = "aibe2e000000001";
const BOT_SECRET = "wecom-robot-e2e-secret";
const ROBOT_NAME = "CountBot";
const OWNER = "zhangsan";
const GROUP = "wrkSFfCgAAe2egroup";

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let aibot: FakeAibot;
let gateway: ServiceProcess;
let worker: ServiceProcess;

function lastUser(body: Record<string, unknown>): string {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = [...messages].reverse().find((message) => message.role === "user");
  if (typeof last?.content === "string") return last.content;
  return ((last?.content ?? []) as Array<{ type: string; text?: string }>).filter((part) => part.type === "text").map((part) => part.text).join(" ");
}

function script(body: Record<string, unknown>): FakeOpenAIStep {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const role = /^You are (.+?), one agent/m.exec(String(messages[0]?.content ?? ""))?.[1];
  if (role) return { text: `${role} findings` };
  const text = lastUser(body);
  if (text.startsWith("[Background event]")) return { text: `Background: ${text.replace("[Background event] ", "").split("\n<!--")[0]!.slice(0, 300)}` };
  // A first streamed text, a tool call, then the rest: the stream shows the first part before the answer is done.
  if (text.includes("stream please")) {
    if (messages.at(-1)?.role === "tool") return { text: ["and here ", "is the rest."], hangMs: 6_000 };
    return { text: "Looking around first. ", toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] };
  }
  return { text: `echo: ${text}` };
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-wecom-robot-"));
  prefix = `countbot-wecom-robot-${randomUUID()}`;
  redis = new Redis(redisUrl);
  aibot = await startFakeAibot({ botId: BOT_ID, secret: BOT_SECRET, robotName: ROBOT_NAME });
  llm = await startFakeOpenAI({ script });
  const config = path.join(root, "config.json");
  const teams = { 分析团队: { mode: "pipeline", agents: [{ id: "analyst", role: "Analyst", task: "analyse the goal" }] } };
  const section = { enabled: true, mode: "robot", robot: { name: ROBOT_NAME, settleMs: 3_000 }, allowFrom: [OWNER], groupPolicy: "mention", rateLimitPerMinute: 100 };
  await writeFile(config, JSON.stringify({ redis: { prefix, leaseTtlMs: 2_000 }, agent: { providerRetries: 0 }, teams, channels: { wecom: section } }));
  const env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    COUNTBOT_CONFIG: config,
    WECOM_BOT_ID: BOT_ID,
    WECOM_BOT_SECRET: BOT_SECRET,
    WECOM_BOT_WS_URL: aibot.url,
    OPENAI_API_KEY: "sk-wecom-robot-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  gateway = startService(["gateway"], env);
  await gateway.waitForLog(/wecom channel started/, 40_000);
  worker = startService(["worker"], env);
  await worker.waitForLog(/worker started/);
}, 90_000);

afterAll(async () => {
  await stopAllServices();
  await aibot?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

let sentinels = 0;

/** Resolves with the settling answer once a later message in `chat` is answered: anything still to come for earlier ones came first (per-chat order). */
async function settle(chat: string): Promise<string> {
  const text = `settle ${++sentinels}`;
  aibot.say({ from: OWNER, text, ...(chat === OWNER ? {} : { group: chat }) });
  return shownWith(chat, (shown) => shown.endsWith(text), `the answer to ${text}`);
}
const modelSaw = (text: string) => llm.requests.some((request) => JSON.stringify(request.body).includes(text));

async function shownWith(chatId: string, matches: (text: string) => boolean, what: string): Promise<string> {
  const finishedOrPushed = () => {
    const streams = aibot.streams.filter((stream) => stream.chatId === chatId && stream.finished && matches(stream.content)).map((stream) => stream.content);
    const pushes = aibot.pushes.filter((push) => push.chatId === chatId && matches(push.content)).map((push) => push.content);
    return [...streams, ...pushes][0];
  };
  return aibot.waitFor(finishedOrPushed, { timeoutMs: 40_000, what }).catch((error: unknown) => {
    throw new Error(`${String(error)}\nshown: ${JSON.stringify(aibot.shown(chatId))}\n--- gateway ---\n${gateway.output().slice(-5_000)}\n--- worker ---\n${worker.output().slice(-3_000)}`);
  });
}

describe("WeCom intelligent robot through gateway and worker processes", () => {
  it("answers a one-to-one message as a finished stream on the message", async () => {
    aibot.say({ from: OWNER, text: "hello robot" });
    expect(await shownWith(OWNER, (text) => text === "echo: hello robot", "the DM reply")).toBe("echo: hello robot");
    expect(aibot.subscribes).toBe(1);
  });

  it("answers a group message that @mentions the robot and ignores one that does not", async () => {
    aibot.say({ from: OWNER, text: "humans talking", group: GROUP, mention: false });
    aibot.say({ from: OWNER, text: "ping", group: GROUP });
    // WeCom names no sender in a robot frame: the label is the id.
    const labelled = `echo: [wecom:${OWNER}] ping`;
    await shownWith(GROUP, (text) => text === labelled, "the group reply");
    const settled = await settle(GROUP);
    expect(modelSaw("humans talking")).toBe(false);
    // The robot's @ is taken out of what the model reads as the message.
    expect(llm.requests.some((request) => lastUser(request.body).includes(`@${ROBOT_NAME} ping`))).toBe(false);
    expect(aibot.shown(GROUP)).toEqual([labelled, settled]);
  });

  it("streams a reply into one stream message, updated in place and finished with the final text", async () => {
    const mark = aibot.streams.length;
    aibot.say({ from: OWNER, text: "stream please" });
    const opened = await aibot.waitFor(() => aibot.streams.slice(mark).find((stream) => stream.chatId === OWNER), { timeoutMs: 30_000, what: "the stream" });
    expect(opened.content).toMatch(/^Looking around first\./);
    const stream: AibotStream = opened;
    await aibot.waitFor(() => stream.finished, { timeoutMs: 30_000, what: "the finished stream" });
    expect(stream.content).toContain("is the rest.");
    expect(stream.updates).toBeGreaterThanOrEqual(2);
    expect(aibot.streams.slice(mark)).toHaveLength(1);
    expect(aibot.pushes.filter((push) => push.content.includes("is the rest."))).toEqual([]);
  });

  it("answers a message delivered twice (same msgid) once", async () => {
    const msgId = `msg-twice-${randomUUID()}`;
    aibot.say({ from: OWNER, text: "delivered twice", msgId });
    aibot.say({ from: OWNER, text: "delivered twice", msgId });
    await shownWith(OWNER, (text) => text === "echo: delivered twice", "the reply");
    await settle(OWNER);
    expect(aibot.shown(OWNER).filter((text) => text === "echo: delivered twice")).toHaveLength(1);
    expect(llm.requests.filter((request) => lastUser(request.body) === "delivered twice")).toHaveLength(1);
  });

  it("runs a team started with @团队名称 in a group and brings its result back into the group", { timeout: 90_000 }, async () => {
    aibot.say({ from: OWNER, text: "@分析团队 看看这家店", group: GROUP });
    await shownWith(GROUP, (text) => text.startsWith("Team [分析团队] started"), "the started reply");
    const result = await shownWith(GROUP, (text) => text.startsWith("Background:"), "the team's result in the group");
    expect(result).toMatch(/Team \[分析团队\] \(run ID: wf-[0-9a-f]+\) completed/);
    expect(result).toContain("Analyst findings");
  });

  it("never logs the robot's secret", () => {
    for (const service of [gateway, worker]) expect(service.output()).not.toContain(BOT_SECRET);
  });
});
