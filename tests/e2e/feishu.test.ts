/**
 * Feishu end to end: the fake open platform driven by the real SDK inside a gateway process, and a
 * worker process, over real Redis, with a fake LLM. The scenarios of the Feishu issue: the long
 * connection first, then the same app in webhook mode.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type BotMessage, type FakeFeishuServer, type FakeUser, startFakeFeishu } from "../support/fake-feishu-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const APP_ID = "cli_e2e0a1b2c3d4e5f6";
const APP_SECRET = "feishu-e2e-app-secret";
const ENCRYPT_KEY = "feishu-e2e-encrypt-key";
const owner: FakeUser = { openId: "ou_owner00000000000000000000000001", userId: "owner01", name: "Owner" };
const P2P = "oc_p2powner0000000000000000000001";
// Sends the voice messages, with a rate budget of its own.
const listener: FakeUser = { openId: "ou_listener000000000000000000000001", name: "Listener" };
const LISTENER_P2P = "oc_p2plistener00000000000000000001";
// A voice message's bytes: the fake transcription service "hears" the text after the Ogg magic.
const VOICE = Buffer.from("OggS how tall is Mount Everest");
const heard = (bytes: Buffer) => bytes.toString("utf8").replace(/^OggS /, "");
const GROUP = "oc_group00000000000000000000000e2e";

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let feishu: FakeFeishuServer;
let env: Record<string, string>;
let gateway: ServiceProcess;
let worker: ServiceProcess;
/** When the model got each question, by its text. */
const askedAt = new Map<string, number>();

function lastUser(body: Record<string, unknown>): string {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = [...messages].reverse().find((message) => message.role === "user");
  if (typeof last?.content === "string") return last.content;
  return ((last?.content ?? []) as Array<{ type: string; text?: string }>).filter((part) => part.type === "text").map((part) => part.text).join(" ");
}

const longReply = () => {
  const paragraph = "A paragraph of the forty kilobyte reply, long enough to need several Feishu cards. ".repeat(10);
  const parts = Array.from({ length: 50 }, (_, index) => `Part ${index}. ${paragraph}`);
  return `${parts.join("\n\n")}\n\nThe very end.`;
};

const textOf = (message: BotMessage) => {
  const card = message.content as { body?: { elements?: Array<{ content?: string }> }; text?: string };
  return card.body?.elements?.map((element) => element.content ?? "").join("") ?? String(card.text ?? "");
};

async function writeConfig(name: string, feishuSection: Record<string, unknown>, more: Record<string, unknown> = {}): Promise<string> {
  const file = path.join(root, name);
  await writeFile(
    file,
    JSON.stringify({
      redis: { prefix, leaseTtlMs: 2_000 },
      agent: { providerRetries: 0 },
      channels: { feishu: { enabled: true, allowFrom: [owner.openId, listener.openId], groupPolicy: "mention", rateLimitPerMinute: 100, ...feishuSection } },
      ...more,
    }),
  );
  return file;
}

async function startGateway(configFile: string): Promise<ServiceProcess> {
  const service = startService(["gateway"], { ...env, COUNTBOT_CONFIG: configFile });
  await service.waitForLog(/channel connected/, 40_000);
  return service;
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-feishu-"));
  prefix = `countbot-feishu-${randomUUID()}`;
  redis = new Redis(redisUrl);
  feishu = await startFakeFeishu({ appId: APP_ID, appSecret: APP_SECRET, pingIntervalSeconds: 1 });
  llm = await startFakeOpenAI({
    script: (body) => {
      const text = lastUser(body);
      askedAt.set(text, Date.now());
      if (text.includes("long reply")) return { text: longReply() };
      if (text.includes("stream")) return { text: ["Streaming ", "the answer ", "in parts."], hangMs: 2_500 };
      return { text: `echo: ${text}` };
    },
    transcriptions: (upload) => ({ text: heard(upload.bytes) }),
  });
  env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    FEISHU_APP_ID: APP_ID,
    FEISHU_APP_SECRET: APP_SECRET,
    FEISHU_DOMAIN: feishu.origin,
    OPENAI_API_KEY: "sk-feishu-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  // Voice is set up for the long connection, and not for the webhook (its describe below).
  gateway = await startGateway(await writeConfig("long-connection.json", { silenceTimeoutMs: 5_000 }, { transcription: { model: "openai/whisper-1", maxSeconds: 30 } }));
  worker = startService(["worker"], { ...env, COUNTBOT_CONFIG: path.join(root, "long-connection.json") });
  await worker.waitForLog(/worker started/);
}, 90_000);

afterAll(async () => {
  await stopAllServices();
  await feishu?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

const repliesTo = (messageId: string) => feishu.messages.filter((message) => message.replyTo === messageId);

async function answerOf(messageId: string, count = 1): Promise<BotMessage[]> {
  return feishu.waitFor(() => (repliesTo(messageId).length >= count ? repliesTo(messageId) : undefined), { timeoutMs: 30_000, what: `a reply to ${messageId}` });
}

let sentinels = 0;

/**
 * Answers once a later message in the same chat is answered: a chat's messages are answered in
 * order, so a reply still to come for an earlier one (a doubled one) would have come first. Sent
 * over the long connection, or to `webhook` when given.
 */
async function settle(chatId: string, sender: typeof owner, webhook?: string): Promise<void> {
  const envelope = feishu.event({ chatId, chatType: "p2p", sender, text: `settle ${++sentinels}` });
  if (webhook) await feishu.postWebhook(webhook, envelope, { encryptKey: ENCRYPT_KEY });
  else await feishu.push(envelope);
  await answerOf(envelope.event.message.message_id);
}

/** A voice message from the listener, its recording stored for the resource API. */
function voiceEnvelope(durationMs: number) {
  const envelope = feishu.event({ chatId: LISTENER_P2P, chatType: "p2p", sender: listener, type: "audio", durationMs });
  const content = JSON.parse(envelope.event.message.content) as { file_key: string };
  feishu.addResource(envelope.event.message.message_id, content.file_key, VOICE, "audio/opus");
  return { envelope, messageId: envelope.event.message.message_id };
}

function send(input: { chatId?: string; chatType?: "p2p" | "group"; text: string; mentionBot?: boolean }) {
  const envelope = feishu.event({
    chatId: input.chatId ?? P2P,
    chatType: input.chatType ?? "p2p",
    sender: owner,
    text: input.text,
    mentions: input.mentionBot ? [{ openId: feishu.bot.openId, name: feishu.bot.name }] : [],
  });
  return { envelope, messageId: envelope.event.message.message_id, pushed: feishu.push(envelope) };
}

describe("Feishu through gateway and worker processes: the long connection", () => {
  it("answers a p2p message with a card replying to it", async () => {
    const { messageId, pushed } = send({ text: "hello bot" });
    expect((await pushed).code).toBe(200);
    const [reply] = await answerOf(messageId);
    expect(reply).toMatchObject({ msgType: "interactive", chatId: P2P });
    expect(textOf(reply!)).toBe("echo: hello bot");
    expect(reply!.uuid).toBeDefined();
  });

  it("ignores a group message without a mention and answers one with it", async () => {
    const quiet = send({ chatId: GROUP, chatType: "group", text: "humans talking" });
    const loud = send({ chatId: GROUP, chatType: "group", text: "ping", mentionBot: true });
    const [reply] = await answerOf(loud.messageId);
    // In a group the model reads who spoke (a speaker label, with the name the contact API gave) before the text.
    expect(textOf(reply!)).toBe(`echo: [Owner (feishu:${owner.openId})] ping`);
    await quiet.pushed;
    expect(repliesTo(quiet.messageId)).toEqual([]);
    expect(llm.requests.some((request) => JSON.stringify(request.body).includes("humans talking"))).toBe(false);
  });

  it("streams a reply into one card that ends with the final text", async () => {
    const { messageId } = send({ text: "stream please" });
    const [card] = await answerOf(messageId);
    const seenAt = Date.now();
    // The card was there while the model was still answering: a draft, later updated in place.
    expect(seenAt - askedAt.get("stream please")!).toBeLessThan(2_500);
    await feishu.waitFor(() => llm.requests.length > 0 && Date.now() - askedAt.get("stream please")! > 3_500, { timeoutMs: 10_000, what: "the end of the turn" });
    await settle(P2P, owner);
    expect(repliesTo(messageId)).toHaveLength(1);
    expect(textOf(card!)).toBe("Streaming the answer in parts.");
  });

  it("delivers a 40 KB reply whole", async () => {
    const { messageId } = send({ text: "give me the long reply" });
    const text = longReply();
    await feishu.waitFor(() => feishu.messages.some((message) => textOf(message).includes("The very end.")), { timeoutMs: 40_000, what: "the last card" });
    const cards = feishu.messages.slice(feishu.messages.indexOf(repliesTo(messageId)[0]!));
    const joined = cards.map(textOf).join("\n\n");
    for (let index = 0; index < 50; index++) expect(joined).toContain(`Part ${index}. A paragraph`);
    expect(joined.replace(/\s+/g, " ")).toBe(text.replace(/\s+/g, " "));
    expect(cards.length).toBeGreaterThanOrEqual(5);
  });

  it("waits out a rate limit and the reply lands once", async () => {
    feishu.failNext("reply", { status: 429, code: 99991400, msg: "request trigger frequency limit", resetSeconds: 1 });
    const { messageId } = send({ text: "after the rate limit" });
    const [reply] = await answerOf(messageId);
    expect(textOf(reply!)).toBe("echo: after the rate limit");
    await settle(P2P, owner);
    expect(repliesTo(messageId)).toHaveLength(1);
    expect(feishu.requests.some((call) => call.route === "reply" && call.status === 429)).toBe(true);
  });

  it("answers a voice message from its transcript, marked as transcribed", async () => {
    const uploads = llm.transcriptions.length;
    const { envelope, messageId } = voiceEnvelope(4_000);
    expect((await feishu.push(envelope)).code).toBe(200);
    const [reply] = await answerOf(messageId);
    expect(textOf(reply!)).toBe("echo: [voice message, transcribed] how tall is Mount Everest");
    const upload = llm.transcriptions[uploads]!;
    expect(upload).toMatchObject({ model: "whisper-1", fileName: expect.stringMatching(/\.ogg$/), fileType: "audio/opus" });
    expect(upload.bytes.equals(VOICE)).toBe(true);
    const resourceCall = feishu.requests.find((call) => call.route === "resource" && call.path.includes(messageId));
    expect(resourceCall?.query).toMatchObject({ type: "file" });
    expect(llm.requests.some((request) => lastUser(request.body) === "[voice message, transcribed] how tall is Mount Everest")).toBe(true);
  });

  it("refuses a voice message over the duration cap in one line, without transcribing it", async () => {
    const uploads = llm.transcriptions.length;
    const { envelope, messageId } = voiceEnvelope(45_000);
    await feishu.push(envelope);
    const [reply] = await answerOf(messageId);
    expect(textOf(reply!)).toBe("Your voice message is 45 s long; I can transcribe up to 30 s. Please send a shorter one or type it.");
    await settle(LISTENER_P2P, listener);
    expect(repliesTo(messageId)).toHaveLength(1);
    expect(llm.transcriptions.length).toBe(uploads);
  });

  it("reconnects a long connection that went silent and answers the next event", async () => {
    const before = feishu.endpointCalls;
    feishu.silence();
    await gateway.waitForLog(/silent; reconnecting/, 20_000);
    await feishu.waitFor(() => feishu.endpointCalls > before && feishu.liveConnections > 0, { timeoutMs: 20_000, what: "a new long connection" });
    const { messageId } = send({ text: "after the silence" });
    const [reply] = await answerOf(messageId);
    expect(textOf(reply!)).toBe("echo: after the silence");
  });

  it("answers the same event once: delivered twice, and again after a gateway restart", async () => {
    const { envelope, messageId } = send({ text: "only once please" });
    await answerOf(messageId);
    await feishu.push(envelope);
    await feishu.push({ ...envelope, header: { ...envelope.header, event_id: `${envelope.header.event_id}-again` } });
    await gateway.stop();
    gateway = await startGateway(path.join(root, "long-connection.json"));
    await feishu.waitFor(() => feishu.liveConnections > 0, { timeoutMs: 20_000, what: "the restarted gateway's connection" });
    expect((await feishu.push(envelope)).code).toBe(200);
    await settle(P2P, owner);
    expect(repliesTo(messageId)).toHaveLength(1);
    expect(llm.requests.filter((request) => lastUser(request.body).includes("only once please"))).toHaveLength(1);
  });
});

describe("Feishu through gateway and worker processes: the webhook", () => {
  let url: string;

  beforeAll(async () => {
    await gateway.stop();
    const configFile = await writeConfig("webhook.json", { mode: "webhook", encryptKey: ENCRYPT_KEY });
    gateway = startService(["gateway"], { ...env, COUNTBOT_CONFIG: configFile });
    const listening = await gateway.waitForLog(/gateway listening/, 40_000);
    await gateway.waitForLog(/channel connected/, 40_000);
    url = `${String(listening.url).replace(/\/$/, "")}/feishu/webhook`;
  }, 90_000);

  it("answers the challenge and a signed, encrypted event", async () => {
    const challenge = await feishu.postWebhook(url, { type: "url_verification", challenge: "e2e-challenge" }, { encryptKey: ENCRYPT_KEY, signKey: null });
    expect(challenge.status).toBe(200);
    expect(JSON.parse(challenge.body)).toEqual({ challenge: "e2e-challenge" });
    const envelope = feishu.event({ chatId: P2P, chatType: "p2p", sender: owner, text: "through the webhook" });
    const answer = await feishu.postWebhook(url, envelope, { encryptKey: ENCRYPT_KEY });
    expect(answer.status).toBe(200);
    const [reply] = await answerOf(envelope.event.message.message_id);
    expect(textOf(reply!)).toBe("echo: through the webhook");
  });

  it("refuses a forged webhook and one encrypted with the wrong key: 401, no model call, gateway still running", async () => {
    const calls = llm.requests.length;
    const forged = feishu.event({ chatId: P2P, chatType: "p2p", sender: owner, text: "forged request" });
    const wrongKey = feishu.event({ chatId: P2P, chatType: "p2p", sender: owner, text: "wrong key request" });
    const answers = [
      await feishu.postWebhook(url, forged, { encryptKey: ENCRYPT_KEY, signKey: "guessed-key" }),
      await feishu.postWebhook(url, forged, { encryptKey: ENCRYPT_KEY, signKey: null }),
      await feishu.postWebhook(url, wrongKey, { encryptKey: ENCRYPT_KEY, encryptWith: "another-key" }),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([401, 401, 401]);
    expect(gateway.child.exitCode).toBeNull();
    const envelope = feishu.event({ chatId: P2P, chatType: "p2p", sender: owner, text: "still serving" });
    expect((await feishu.postWebhook(url, envelope, { encryptKey: ENCRYPT_KEY })).status).toBe(200);
    const [reply] = await answerOf(envelope.event.message.message_id);
    expect(textOf(reply!)).toBe("echo: still serving");
    // The one model call since is the served message's: the refused ones never reached the bus.
    expect(llm.requests.length).toBe(calls + 1);
  });

  it("answers a webhook event Feishu delivers twice once", async () => {
    const envelope = feishu.event({ chatId: P2P, chatType: "p2p", sender: owner, text: "webhook twice" });
    await feishu.postWebhook(url, envelope, { encryptKey: ENCRYPT_KEY });
    await feishu.postWebhook(url, envelope, { encryptKey: ENCRYPT_KEY });
    await answerOf(envelope.event.message.message_id);
    await settle(P2P, owner, url);
    expect(repliesTo(envelope.event.message.message_id)).toHaveLength(1);
  });

  it("without transcription configured says in one plain line that voice is not set up, and calls no model", async () => {
    const [calls, uploads] = [llm.requests.length, llm.transcriptions.length];
    const { envelope, messageId } = voiceEnvelope(3_000);
    expect((await feishu.postWebhook(url, envelope, { encryptKey: ENCRYPT_KEY })).status).toBe(200);
    const [reply] = await answerOf(messageId);
    expect(textOf(reply!)).toBe("Voice messages are not set up on this bot, so I can't listen to this one. Please type your message instead.");
    await settle(LISTENER_P2P, listener, url);
    expect(repliesTo(messageId)).toHaveLength(1);
    // The one model call is the settling message's.
    expect([llm.requests.length - 1, llm.transcriptions.length]).toEqual([calls, uploads]);
  });

  it("never logs the app secret or the encrypt key", () => {
    for (const service of [gateway, worker]) {
      expect(service.output()).not.toContain(APP_SECRET);
      expect(service.output()).not.toContain(ENCRYPT_KEY);
    }
  });
});
