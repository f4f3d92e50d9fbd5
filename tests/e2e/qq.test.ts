/**
 * QQ end to end: the fake QQ platform (its WebSocket gateway and OpenAPI routes) and gateway and
 * worker processes over real Redis, with a fake LLM. QQ cannot edit a bot's message: a reply shows
 * as its final text, split into parts that fit, each a passive reply carrying the user message's
 * `msg_id` and a rising `msg_seq`. Last, the same bot in webhook mode, its Ed25519 signature checked.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeQQServer, type FakeQQUser, type QQBotMessage, startFakeQQ } from "../support/fake-qq-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { qqSign } from "../support/qq-events.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const APP_ID = "102000777";
const APP_SECRET = "qqE2eAppSecret0123456789abcdefXY";
const owner: FakeQQUser = { openid: "E2EOWNEROPENID000000000000000001", guildId: "E2EOWNEROPENID000000000000000001", username: "Owner" };
const stranger: FakeQQUser = { openid: "E2ESTRANGEROPENID000000000000009", guildId: "E2ESTRANGEROPENID000000000000009", username: "Stranger" };
const GROUP = "E2EGROUPOPENID00000000000000001";
const GUILD = { guild: "7000000000001", channel: "7100000000001" };
const ownerChat = `user:${owner.openid}`;
const groupChat = `group:${GROUP}`;

/** The QQ channel's own start line (the web channel logs "channel connected" too). */
const qqConnected = /^qq channel started$/;

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let qq: FakeQQServer;
let env: Record<string, string>;
let gateway: ServiceProcess;
let worker: ServiceProcess;
let letCrashReplyEnd: () => void = () => undefined;
const crashReplyMayEnd = new Promise<void>((resolve) => (letCrashReplyEnd = resolve));

function lastUser(body: Record<string, unknown>): string {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = [...messages].reverse().find((message) => message.role === "user");
  if (typeof last?.content === "string") return last.content;
  return ((last?.content ?? []) as Array<{ type: string; text?: string }>).filter((part) => part.type === "text").map((part) => part.text).join(" ");
}

const paragraphs = (count: number, words: string) => Array.from({ length: count }, (_, index) => `Part ${index}. ${words.repeat(5)}`).join("\n\n");
const longReply = () => paragraphs(24, "A paragraph long enough to need several QQ messages. ");

function script(body: Record<string, unknown>): FakeOpenAIStep {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const role = /^You are (.+?), one agent/m.exec(String(messages[0]?.content ?? ""))?.[1];
  if (role) return { text: `${role} findings` };
  const text = lastUser(body);
  if (text.startsWith("[Background event]")) return { text: `Background: ${text.replace("[Background event] ", "").split("\n<!--")[0]!.slice(0, 300)}` };
  if (text.includes("long reply")) return { text: longReply() };
  if (text.includes("stream please")) {
    if (messages.at(-1)?.role === "tool") return { text: ["and here ", "is the rest."], hangMs: 1_000 };
    return { text: "Looking around first. ", toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] };
  }
  // Written up to its last words, then held until the test lets it finish: the reply is in flight.
  if (text.includes("crash reply")) return { text: [paragraphs(30, "Crash test words to fill the message. "), "\n\nThe end."], holdUntil: crashReplyMayEnd };
  return { text: `echo: ${text}` };
}

async function writeConfig(name: string, section: Record<string, unknown>): Promise<string> {
  const file = path.join(root, name);
  // Named as the seed design's users name teams: `@团队名称` in a QQ group.
  const teams = { 分析团队: { mode: "pipeline", agents: [{ id: "analyst", role: "Analyst", task: "analyse the goal" }] } };
  const qqSection = { enabled: true, allowFrom: [owner.openid], groupPolicy: "mention", rateLimitPerMinute: 100, intents: ["groupAndC2C", "publicGuildMessages", "guildMessages"], ...section };
  await writeFile(file, JSON.stringify({ redis: { prefix, leaseTtlMs: 2_000 }, agent: { providerRetries: 0 }, teams, channels: { qq: qqSection } }));
  return file;
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-qq-"));
  prefix = `countbot-qq-${randomUUID()}`;
  redis = new Redis(redisUrl);
  qq = await startFakeQQ({ appId: APP_ID, appSecret: APP_SECRET, maxLength: 3_000 });
  llm = await startFakeOpenAI({ script });
  env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    COUNTBOT_CONFIG: await writeConfig("websocket.json", {}),
    QQ_BOT_APP_ID: APP_ID,
    QQ_BOT_APP_SECRET: APP_SECRET,
    QQ_BOT_API_ROOT: qq.origin,
    QQ_BOT_TOKEN_URL: qq.tokenUrl,
    OPENAI_API_KEY: "sk-qq-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  gateway = startService(["gateway"], env);
  await gateway.waitForLog(qqConnected, 40_000);
  worker = startService(["worker"], env);
  await worker.waitForLog(/worker started/);
}, 90_000);

afterAll(async () => {
  await stopAllServices();
  await qq?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

let sentinels = 0;

/**
 * What the bot showed in the owner's chat since `mark`, once a later message of the owner's is
 * answered: a chat's messages are answered in order, its replies delivered in order, so anything
 * still to come for the earlier ones (a doubled reply, a late part) is among them. The sentinel's
 * own answer is left out.
 */
async function settledSince(mark: number): Promise<QQBotMessage[]> {
  const text = `settle ${++sentinels}`;
  qq.dispatch(qq.c2c({ from: owner, text }));
  const answer = await shownWith(ownerChat, (shown) => shown === `echo: ${text}`, `the answer to ${text}`);
  const all = shownIn(ownerChat).slice(mark);
  return all.slice(0, all.indexOf(answer));
}

const shownIn = (chatId: string): QQBotMessage[] => qq.messages.filter((message) => message.chatId === chatId);

async function shownWith(chatId: string, matches: (text: string) => boolean, what: string): Promise<QQBotMessage> {
  return qq.waitFor(() => shownIn(chatId).find((message) => matches(message.text)), { timeoutMs: 40_000, what }).catch((error: unknown) => {
    throw new Error(`${String(error)}\nshown: ${JSON.stringify(shownIn(chatId))}\n--- gateway ---\n${gateway.output().slice(-5_000)}\n--- worker ---\n${worker.output().slice(-3_000)}`);
  });
}

const modelSaw = (text: string) => llm.requests.some((request) => JSON.stringify(request.body).includes(text));

/** Passive replies to one message: its msg_id on each, msg_seq rising from 1. */
function expectPassive(replies: QQBotMessage[], msgId: string): void {
  expect(replies.map((reply) => reply.msgId)).toEqual(replies.map(() => msgId));
  expect(replies.map((reply) => reply.msgSeq)).toEqual(replies.map((_, index) => index + 1));
}

describe("QQ through gateway and worker processes: WebSocket gateway", () => {
  it("answers a one-to-one message as a passive reply to it", async () => {
    const mark = shownIn(ownerChat).length;
    const event = qq.c2c({ from: owner, text: "hello bot" });
    qq.dispatch(event);
    await shownWith(ownerChat, (text) => text === "echo: hello bot", "the DM reply");
    const replies = await settledSince(mark);
    expect(replies.map((reply) => reply.text)).toEqual(["echo: hello bot"]);
    expectPassive(replies, event.d.id);
    expect(qq.gateway.sessions[0]?.intents).toBe((1 << 25) | (1 << 30) | (1 << 9));
  });

  it("answers a group @-message and ignores an unaddressed guild channel message", async () => {
    qq.dispatch(qq.channel({ ...GUILD, from: owner, text: "humans talking", all: true }));
    const event = qq.groupAt({ group: GROUP, from: owner, text: "ping" });
    qq.dispatch(event);
    // A group's messages reach the model labelled with their speaker (the Groups section).
    const reply = await shownWith(groupChat, (text) => text.startsWith("echo: ") && text.endsWith("ping"), "the group reply");
    expect(reply.text).toContain(`qq:${owner.openid}`);
    expect(reply.msgId).toBe(event.d.id);
    // A message addressed to the bot in that guild channel, answered: the unaddressed one before it was judged.
    qq.dispatch(qq.channel({ ...GUILD, from: owner, text: "settle the channel", atBot: true }));
    await shownWith(`channel:${GUILD.channel}`, (text) => text.endsWith("settle the channel"), "the guild channel's answer");
    expect(modelSaw("humans talking")).toBe(false);
    expect(shownIn(`channel:${GUILD.channel}`).filter((message) => !message.text.endsWith("settle the channel"))).toEqual([]);
  });

  it("gives a stranger a pairing code and never asks the model", async () => {
    qq.dispatch(qq.c2c({ from: stranger, text: "let me in" }));
    const code = await shownWith(`user:${stranger.openid}`, (text) => text.includes("countbot pairing approve"), "the pairing code");
    expect(code.text).toContain(`Your qq id is ${stranger.openid}`);
    expect(modelSaw("let me in")).toBe(false);
  });

  it("splits a long reply into passive replies QQ takes, in order, msg_seq rising", async () => {
    const mark = shownIn(ownerChat).length;
    const event = qq.c2c({ from: owner, text: "give me the long reply" });
    qq.dispatch(event);
    await shownWith(ownerChat, (text) => text.includes("Part 23."), "the last part");
    const parts = await settledSince(mark);
    expect(parts.length).toBeGreaterThanOrEqual(2);
    expect(parts.length).toBeLessThanOrEqual(5);
    for (const part of parts) expect(part.text.length).toBeLessThanOrEqual(3_000);
    const joined = parts.map((part) => part.text).join("\n\n");
    for (let index = 0; index < 24; index++) expect(joined).toContain(`Part ${index}. A paragraph`);
    expect(joined.indexOf("Part 0.")).toBeLessThan(joined.indexOf("Part 23."));
    expectPassive(parts, event.d.id);
  });

  it("shows a streamed reply as whole messages, never edited", async () => {
    const mark = shownIn(ownerChat).length;
    qq.dispatch(qq.c2c({ from: owner, text: "stream please" }));
    await shownWith(ownerChat, (text) => text.includes("is the rest."), "the final reply");
    const texts = (await settledSince(mark)).map((message) => message.text);
    expect(texts.filter((text) => text.includes("is the rest."))).toHaveLength(1);
    expect(texts.join("\n")).toContain("Looking around first.");
    expect(qq.requests.filter((call) => call.route === "unknown")).toEqual([]);
  });

  it("answers an event delivered twice (same event id) once", async () => {
    const mark = shownIn(ownerChat).length;
    qq.dispatch(qq.c2c({ from: owner, text: "redelivered message" }), 2);
    await shownWith(ownerChat, (text) => text === "echo: redelivered message", "the reply");
    expect((await settledSince(mark)).filter((message) => message.text === "echo: redelivered message")).toHaveLength(1);
    expect(llm.requests.filter((request) => lastUser(request.body) === "redelivered message")).toHaveLength(1);
  });

  it("runs a team started with @团队名称 in a group and brings its result back as a passive reply", { timeout: 90_000 }, async () => {
    const event = qq.groupAt({ group: GROUP, from: owner, text: "@分析团队 看看这家店" });
    qq.dispatch(event);
    await shownWith(groupChat, (text) => text.startsWith("Team [分析团队] started"), "the started reply");
    const result = await shownWith(groupChat, (text) => text.startsWith("Background:"), "the team's result in the group");
    expect(result.text).toMatch(/Team \[分析团队\] \(run ID: wf-[0-9a-f]+\) completed/);
    expect(result.text).toContain("Analyst findings");
    expect(result.msgId).toBe(event.d.id);
    const replies = shownIn(groupChat).filter((message) => message.msgId === event.d.id);
    expect(new Set(replies.map((reply) => reply.msgSeq)).size).toBe(replies.length);
    expect(modelSaw("看看这家店")).toBe(true);
  });

  it("resumes its gateway session after the socket drops, and gets the event sent meanwhile", async () => {
    const session = qq.gateway.sessions.at(-1)!;
    qq.gateway.drop();
    qq.dispatch(qq.c2c({ from: owner, text: "while you were away" }));
    await shownWith(ownerChat, (text) => text === "echo: while you were away", "the reply after the resume");
    expect(session.resumes).toBe(1);
  });

  it("finishes a reply once when the gateway is killed mid-reply and the standby takes over", { timeout: 90_000 }, async () => {
    const standby = startService(["gateway"], env);
    await standby.waitForLog(/standing for the leader lease/);
    const mark = shownIn(ownerChat).length;
    const event = qq.c2c({ from: owner, text: "the crash reply" });
    qq.dispatch(event);
    // The model has written the reply but for its end when the gateway that took the message dies.
    await qq.waitFor(() => llm.requests.some((request) => lastUser(request.body) === "the crash reply"), { timeoutMs: 30_000, what: "the model writing the reply" });
    await gateway.stop("SIGKILL");
    gateway = standby;
    await gateway.waitForLog(qqConnected, 40_000);
    letCrashReplyEnd();
    await shownWith(ownerChat, (text) => text.includes("The end."), "the reply's last part, from the standby");
    const parts = await settledSince(mark);
    expect(parts.length).toBeGreaterThanOrEqual(2);
    const joined = parts.map((part) => part.text).join("\n\n");
    for (let index = 0; index < 30; index++) expect(joined.split(`Part ${index}. Crash`).length - 1, `part ${index}`).toBe(1);
    expect(joined.split("The end.").length - 1).toBe(1);
    expectPassive(parts, event.d.id);
  });
});

describe("QQ through gateway and worker processes: webhook mode", () => {
  let url: string;

  beforeAll(async () => {
    await gateway.stop();
    gateway = startService(["gateway"], { ...env, COUNTBOT_CONFIG: await writeConfig("webhook.json", { mode: "webhook" }) });
    const listening = await gateway.waitForLog(/gateway listening/, 40_000);
    await gateway.waitForLog(qqConnected, 40_000);
    url = `${String(listening.url).replace(/\/$/, "")}/qq/webhook`;
  }, 90_000);

  it("answers QQ's address validation with the signature of event_ts + plain_token", async () => {
    const payload = { op: 13, d: { plain_token: "Arq0D5A61EgUu4OxUvOp", event_ts: "1725442341" } };
    const answer = await qq.postWebhook(url, payload);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ plain_token: "Arq0D5A61EgUu4OxUvOp", signature: qqSign(APP_SECRET, "1725442341Arq0D5A61EgUu4OxUvOp") });
  });

  it("refuses a forged signature before it parses the body, and answers a signed event", async () => {
    const forged = qq.c2c({ from: owner, text: "forged callback" });
    expect((await qq.postWebhook(url, { op: 0, s: 1, t: forged.t, id: forged.id, d: forged.d }, { secret: "guessedSecret0123456789abcdefghij" })).status).toBe(401);
    // Not even JSON: a body that is never parsed cannot be told from a good one, so the answer is the signature's.
    const garbage = await fetch(url, { method: "POST", headers: { "x-signature-ed25519": "ab".repeat(64), "x-signature-timestamp": String(Math.floor(Date.now() / 1000)) }, body: "{not json" });
    expect(garbage.status).toBe(401);
    const event = qq.c2c({ from: owner, text: "through the webhook" });
    const answer = await qq.postWebhook(url, { op: 0, s: 2, t: event.t, id: event.id, d: event.d });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ op: 12, d: 0 });
    await shownWith(ownerChat, (text) => text === "echo: through the webhook", "the webhook's reply");
    expect(modelSaw("forged callback")).toBe(false);
  });

  it("never logs the app secret", () => {
    for (const service of [gateway, worker]) expect(service.output()).not.toContain(APP_SECRET);
  });
});
