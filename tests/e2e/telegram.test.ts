/**
 * Telegram end to end: the fake Bot API server driven by telegraf inside a gateway process, and a
 * worker process, over real Redis, with a fake LLM. The scenarios of the Telegram issue.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeTelegramServer, type FakeUser, type SentItem, startFakeTelegram } from "../support/fake-telegram-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const BOT_TOKEN = "4242:telegram-e2e-secret-token";
const OWNER = 111;
// A second allowed user: the owner's messages in this file approach the per-sender rate limit.
const SECOND = 222;
// The voice notes' sender, with a rate budget of its own.
const LISTENER = 333;
const GROUP = -100200;
// A voice note's bytes: the fake transcription service "hears" the text after the Ogg magic.
const VOICE = Buffer.from("OggS what is the capital of France");
const heard = (bytes: Buffer) => bytes.toString("utf8").replace(/^OggS /, "");
const PNG = Buffer.from("89504e470d0a1a0a0000000d4948445200000001000000010806000000", "hex");

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let telegram: FakeTelegramServer;
let env: Record<string, string>;
let gateway: ServiceProcess;
let worker: ServiceProcess;

function lastUser(body: Record<string, unknown>): { text: string; hasImage: boolean } {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = [...messages].reverse().find((message) => message.role === "user");
  if (typeof last?.content === "string") return { text: last.content, hasImage: false };
  const parts = (last?.content ?? []) as Array<{ type: string; text?: string }>;
  return { text: parts.filter((part) => part.type === "text").map((part) => part.text).join(" "), hasImage: parts.some((part) => part.type === "image_url") };
}

const longReply = () => {
  const paragraph = "This paragraph is here to make the reply long enough to need two Telegram messages. ".repeat(12);
  return `${paragraph}\n\n${paragraph}\n\n\`\`\`js\n${Array.from({ length: 40 }, (_, index) => `console.log("line ${index}");`).join("\n")}\n\`\`\`\n\n${paragraph}\n\n${paragraph}`;
};

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-telegram-"));
  prefix = `countbot-telegram-${randomUUID()}`;
  redis = new Redis(redisUrl);
  telegram = await startFakeTelegram({ token: BOT_TOKEN });
  llm = await startFakeOpenAI({
    script: (body) => {
      const { text, hasImage } = lastUser(body);
      const history = (body.messages as Array<{ role: string }>).filter((message) => message.role === "user").length - 1;
      if (hasImage) return { text: "I see an image." };
      if (text.includes("long reply")) return { text: longReply() };
      if (text.includes("slow job")) return { text: "", delayMs: 30_000 };
      if (text.includes("crash job")) return { text: "survived the crash", delayMs: 1_500 };
      if (text.includes("how many")) return { text: `you said ${history} things before` };
      return { text: `echo: ${text}` };
    },
    transcriptions: (upload) => ({ text: heard(upload.bytes) }),
  });
  const configFile = path.join(root, "countbot.json");
  await writeFile(
    configFile,
    JSON.stringify({
      redis: { prefix, leaseTtlMs: 2_000 },
      agent: { providerRetries: 0 },
      channels: { telegram: { enabled: true, allowFrom: [String(OWNER), String(SECOND), String(LISTENER)], groupPolicy: "mention", rateLimitPerMinute: 100 } },
      transcription: { model: "openai/whisper-1", maxSeconds: 120 },
    }),
  );
  env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    TELEGRAM_BOT_TOKEN: BOT_TOKEN,
    TELEGRAM_API_ROOT: telegram.apiRoot,
    OPENAI_API_KEY: "sk-telegram-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  gateway = startService(["gateway"], env);
  await gateway.waitForLog(/channel connected/);
  worker = startService(["worker"], env);
  await worker.waitForLog(/worker started/);
}, 60_000);

afterAll(async () => {
  await stopAllServices();
  await telegram?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

const owner = () => telegram.user({ id: OWNER, first_name: "Owner", username: "owner" });
const listener = () => telegram.user({ id: LISTENER, first_name: "Listener" });
const messagesTo = (chatId: number, after: number): SentItem[] =>
  telegram.sent.slice(after).filter((item) => item.chatId === chatId && item.method === "sendMessage");

async function replyTo(chatId: number, after: number, count = 1): Promise<SentItem[]> {
  return telegram.waitFor(() => (messagesTo(chatId, after).length >= count ? messagesTo(chatId, after) : undefined), { timeoutMs: 30_000, what: `${count} message(s) to ${chatId}` });
}

let sentinels = 0;

/**
 * The bot's messages to a chat since `after`, once a message sent after them is answered: a chat's
 * messages are answered in order and its replies delivered in order, so anything still to come for
 * the earlier ones (a doubled reply, a late part) is among them. The sentinel's answer is left out.
 */
async function settledTo(chatId: number, after: number, from: FakeUser): Promise<SentItem[]> {
  const text = `settle ${++sentinels}`;
  telegram.sendText({ chatId, from, text });
  await telegram.waitFor(() => messagesTo(chatId, after).some((item) => item.text === `echo: ${text}`) || undefined, { timeoutMs: 30_000, what: `the answer to ${text}` });
  return messagesTo(chatId, after).filter((item) => item.text !== `echo: ${text}`);
}

describe("Telegram through gateway and worker processes", () => {
  it("answers a DM with the model's reply, threaded to the message", async () => {
    const mark = telegram.sent.length;
    const update = telegram.sendText({ chatId: OWNER, from: owner(), text: "hello bot" });
    const [reply] = await replyTo(OWNER, mark);
    expect(reply!.text).toBe("echo: hello bot");
    expect(reply!.replyToMessageId).toBe(update.message?.message_id);
    expect(telegram.sent.slice(mark).some((item) => item.method === "sendChatAction" && item.chatId === OWNER)).toBe(true);
  });

  it("gives a stranger a pairing code and calls no model", async () => {
    const stranger = telegram.user({ id: 999, first_name: "Stranger" });
    const mark = telegram.sent.length;
    const calls = llm.requests.length;
    telegram.sendText({ chatId: 999, from: stranger, text: "let me in" });
    const [reply] = await replyTo(999, mark);
    expect(reply!.text).toMatch(/[A-HJ-NP-Z2-9]{8}/);
    expect(reply!.text).toContain("countbot pairing approve");
    expect(llm.requests.length).toBe(calls);
  });

  it("in a group ignores an unmentioned message and answers a mention and a reply to the bot", async () => {
    telegram.addChat({ id: GROUP, type: "supergroup", title: "Team" });
    const mark = telegram.sent.length;
    telegram.sendText({ chatId: GROUP, from: owner(), text: "just chatting among humans" });
    telegram.sendText({ chatId: GROUP, from: owner(), text: "@CountBot ping" });
    const [first] = await replyTo(GROUP, mark);
    // In a group the model reads who spoke (a speaker label) before the text.
    expect(first!.text).toBe(`echo: [Owner (telegram:${OWNER})] ping`);
    const botMessage = telegram.messageOf(GROUP, first!.messageId!);
    telegram.sendText({ chatId: GROUP, from: owner(), text: "and a follow-up", replyToMessage: botMessage });
    const replies = await replyTo(GROUP, mark, 2);
    expect(replies.map((item) => item.text)).toEqual([`echo: [Owner (telegram:${OWNER})] ping`, `echo: [Owner (telegram:${OWNER})] and a follow-up`]);
    expect(llm.requests.some((request) => JSON.stringify(request.body).includes("just chatting among humans"))).toBe(false);
  });

  it("sends a 5,000-character reply as two messages, in order, with the code block intact", async () => {
    const mark = telegram.sent.length;
    telegram.sendText({ chatId: OWNER, from: owner(), text: "give me a long reply" });
    const parts = await replyTo(OWNER, mark, 2);
    const all = await settledTo(OWNER, mark, owner());
    expect(all).toHaveLength(2);
    for (const part of all) {
      expect(part.text!.length).toBeLessThanOrEqual(4096);
      expect((part.text!.match(/<pre>/g) ?? []).length).toBe((part.text!.match(/<\/pre>/g) ?? []).length);
    }
    const joined = parts.map((part) => part.text).join("\n");
    expect(joined).toContain('console.log("line 0");');
    expect(joined).toContain('console.log("line 39");');
    expect(joined.indexOf("line 0")).toBeLessThan(joined.indexOf("line 39"));
  });

  it("honours a 429 retry_after and loses or doubles nothing", async () => {
    const mark = telegram.sent.length;
    telegram.failNext("sendMessage", { error_code: 429, description: "Too Many Requests: retry after 1", retry_after: 1 });
    telegram.sendText({ chatId: OWNER, from: owner(), text: "after the rate limit" });
    const [reply] = await replyTo(OWNER, mark);
    expect(reply!.text).toBe("echo: after the rate limit");
    expect(await settledTo(OWNER, mark, owner())).toHaveLength(1);
    expect(telegram.requests.some((call) => call.method === "sendMessage" && call.failed?.error_code === 429)).toBe(true);
  });

  it("answers the same update delivered twice only once", async () => {
    const mark = telegram.sent.length;
    const update = telegram.textUpdate({ chatId: OWNER, from: owner(), text: "delivered twice" });
    telegram.queueUpdate(update);
    telegram.queueUpdate(update);
    await replyTo(OWNER, mark);
    expect((await settledTo(OWNER, mark, owner())).map((item) => item.text)).toEqual(["echo: delivered twice"]);
  });

  it("/stop stops a long turn and /new forgets", async () => {
    let mark = telegram.sent.length;
    telegram.sendText({ chatId: OWNER, from: owner(), text: "start the slow job" });
    await telegram.waitFor(() => llm.requests.some((request) => JSON.stringify(request.body).includes("start the slow job")) || undefined, { timeoutMs: 20_000, what: "the slow model call" });
    telegram.sendText({ chatId: OWNER, from: owner(), text: "/stop" });
    const replies = await replyTo(OWNER, mark, 2);
    expect(replies.map((item) => item.text)).toContain("[stopped]");

    mark = telegram.sent.length;
    telegram.sendText({ chatId: OWNER, from: owner(), text: "/new" });
    await replyTo(OWNER, mark);
    mark = telegram.sent.length;
    telegram.sendText({ chatId: OWNER, from: owner(), text: "how many things did I say?" });
    const [answer] = await replyTo(OWNER, mark);
    expect(answer!.text).toBe("you said 0 things before");
  });

  it("passes a photo to the model as an image part", async () => {
    const mark = telegram.sent.length;
    telegram.sendPhoto({ chatId: OWNER, from: owner(), bytes: PNG, caption: "what is this?" });
    const [reply] = await replyTo(OWNER, mark);
    expect(reply!.text).toBe("I see an image.");
    const request = llm.requests.find((entry) => JSON.stringify(entry.body).includes("image_url"));
    expect(JSON.stringify(request!.body)).toContain(PNG.toString("base64"));
  });

  it("answers a voice note from its transcript, marked as transcribed", async () => {
    const mark = telegram.sent.length;
    const uploads = llm.transcriptions.length;
    const update = telegram.sendVoice({ chatId: LISTENER, from: listener(), bytes: VOICE, duration: 3 });
    const [reply] = await replyTo(LISTENER, mark);
    expect(reply!.text).toBe("echo: [voice message, transcribed] what is the capital of France");
    expect(reply!.replyToMessageId).toBe(update.message?.message_id);
    const upload = llm.transcriptions[uploads]!;
    expect(upload).toMatchObject({ model: "whisper-1", fileName: expect.stringMatching(/\.ogg$/), authorization: "Bearer sk-telegram-0123456789" });
    expect(upload.bytes.equals(VOICE)).toBe(true);
    const request = llm.requests.find((entry) => lastUser(entry.body).text.includes("what is the capital of France"));
    expect(lastUser(request!.body).text).toBe("[voice message, transcribed] what is the capital of France");
  });

  it("refuses a voice note over the duration cap in one line, without transcribing it", async () => {
    const mark = telegram.sent.length;
    const uploads = llm.transcriptions.length;
    telegram.sendVoice({ chatId: LISTENER, from: listener(), bytes: VOICE, duration: 600, as: "audio" });
    const [reply] = await replyTo(LISTENER, mark);
    expect(reply!.text).toBe("Your voice message is 10 min long; I can transcribe up to 2 min. Please send a shorter one or type it.");
    expect(llm.transcriptions.length).toBe(uploads);
  });

  it("answers exactly once when the worker is killed mid-turn", async () => {
    const mark = telegram.sent.length;
    const second = telegram.user({ id: SECOND, first_name: "Second" });
    telegram.sendText({ chatId: SECOND, from: second, text: "the crash job" });
    await telegram.waitFor(() => llm.requests.some((request) => JSON.stringify(request.body).includes("the crash job")) || undefined, { timeoutMs: 20_000, what: "the model call" });
    await worker.stop("SIGKILL");
    worker = startService(["worker"], env);
    const [reply] = await replyTo(SECOND, mark);
    expect(reply!.text).toBe("survived the crash");
    expect((await settledTo(SECOND, mark, second)).map((item) => item.text)).toEqual(["survived the crash"]);
  });
});

describe("Telegram voice without transcription configured", () => {
  it("says in one plain line that voice is not set up, and calls no model", async () => {
    await gateway.stop();
    const configFile = path.join(root, "no-voice.json");
    await writeFile(configFile, JSON.stringify({ redis: { prefix, leaseTtlMs: 2_000 }, agent: { providerRetries: 0 }, channels: { telegram: { enabled: true, allowFrom: [String(LISTENER)] } } }));
    gateway = startService(["gateway"], { ...env, COUNTBOT_CONFIG: configFile });
    await gateway.waitForLog(/channel connected/);
    const mark = telegram.sent.length;
    const [calls, uploads] = [llm.requests.length, llm.transcriptions.length];
    telegram.sendVoice({ chatId: LISTENER, from: listener(), bytes: VOICE, duration: 3 });
    const [reply] = await replyTo(LISTENER, mark);
    expect(reply!.text).toBe("Voice messages are not set up on this bot, so I can't listen to this one. Please type your message instead.");
    expect(reply!.parseMode).toBeUndefined();
    expect(await settledTo(LISTENER, mark, listener())).toHaveLength(1);
    // The one model call is the settling message's.
    expect([llm.requests.length - 1, llm.transcriptions.length]).toEqual([calls, uploads]);
  });
});
