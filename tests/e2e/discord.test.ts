/**
 * Discord end to end: the fake Discord (REST + WebSocket gateway) driven by discord.js inside
 * gateway processes, and a worker process, over real Redis, with a fake LLM. The scenarios of the
 * Discord issue.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeDiscordServer, type FakeGuild, type FakeUser, type BotMessage, startFakeDiscord } from "../support/fake-discord-server.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { helpText } from "../../src/bus/commands.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const BOT_TOKEN = "MTA1NDI.discord-e2e.secret-token-value";
// A voice message's bytes: the fake transcription service "hears" the text after the Ogg magic.
const VOICE = Buffer.from("OggS which planet is the largest");
const heard = (bytes: Buffer) => bytes.toString("utf8").replace(/^OggS /, "");

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let discord: FakeDiscordServer;
let guild: FakeGuild;
let owner: FakeUser;
// A second allowed user: the owner's messages in this file approach the per-sender rate limit.
let second: FakeUser;
let helper: FakeUser;
let stranger: FakeUser;
// Sends the voice messages, with a rate budget of its own.
let listener: FakeUser;
let env: Record<string, string>;
let gateway: ServiceProcess;
let worker: ServiceProcess;

function lastUser(body: Record<string, unknown>): string {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = [...messages].reverse().find((message) => message.role === "user");
  if (typeof last?.content === "string") return last.content;
  return ((last?.content ?? []) as Array<{ type: string; text?: string }>).map((part) => part.text ?? "").join(" ");
}

const longReply = () => {
  const paragraph = "This paragraph is here to make the reply long enough to need three Discord messages. ".repeat(12);
  return `${paragraph}\n\n${paragraph}\n\n\`\`\`js\n${Array.from({ length: 40 }, (_, index) => `console.log("line ${index}");`).join("\n")}\n\`\`\`\n\n${paragraph}\n\n${paragraph}`;
};

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-discord-"));
  prefix = `countbot-discord-${randomUUID()}`;
  redis = new Redis(redisUrl);
  discord = await startFakeDiscord({ token: BOT_TOKEN });
  guild = discord.addGuild({ name: "Team" });
  owner = discord.user({ username: "owner", globalName: "Owner" });
  second = discord.user({ username: "second" });
  helper = discord.user({ username: "helper" });
  stranger = discord.user({ username: "stranger" });
  listener = discord.user({ username: "listener" });
  const helpers = discord.addRole(guild, "helpers");
  discord.addMember(guild, owner);
  discord.addMember(guild, helper, [helpers.id]);
  discord.addMember(guild, stranger);
  llm = await startFakeOpenAI({
    script: (body) => {
      const text = lastUser(body);
      const history = (body.messages as Array<{ role: string }>).filter((message) => message.role === "user").length - 1;
      if (text.includes("long reply")) return { text: longReply() };
      if (text.includes("crash job")) return { text: "survived the crash", delayMs: 4_000 };
      // Streams its text, then stalls before finishing: the draft message is up when the gateway dies.
      if (text.includes("crash draft")) return { text: ["the draft shows ", "this text"], hangMs: 5_000 };
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
      channels: { discord: { enabled: true, allowFrom: [owner.id, second.id, listener.id], allowRoles: [helpers.id], groupPolicy: "mention", registerCommands: true } },
      transcription: { model: "openai/whisper-1", maxSeconds: 60 },
    }),
  );
  env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    DISCORD_BOT_TOKEN: BOT_TOKEN,
    DISCORD_API_ROOT: discord.apiRoot,
    OPENAI_API_KEY: "sk-discord-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  gateway = startService(["gateway"], env);
  await gateway.waitForLog(/discord channel started/);
  worker = startService(["worker"], env);
  await worker.waitForLog(/worker started/);
}, 60_000);

afterAll(async () => {
  await stopAllServices();
  await discord?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

const mention = (text: string) => `<@${discord.botUser.id}> ${text}`;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The bot's messages in a channel since `mark` (a count of earlier ones). */
const since = (channelId: string, mark: number): BotMessage[] => discord.sentIn(channelId).slice(mark);

/** Waits until the bot's messages since `mark` include one whose text (after edits) is `text`. */
function replyWith(channelId: string, mark: number, text: string | RegExp): Promise<BotMessage> {
  const matches = (content: string) => (typeof text === "string" ? content === text : text.test(content));
  return discord
    .waitFor(() => since(channelId, mark).find((message) => matches(message.content)), { timeoutMs: 40_000, what: `a reply ${String(text)} in ${channelId}` })
    .catch((error: unknown) => {
      const tail = (service: ServiceProcess) => service.output().slice(-6_000);
      throw new Error(`${String(error)}\nsent: ${JSON.stringify(since(channelId, mark))}\n--- gateway ---\n${tail(gateway)}\n--- worker ---\n${tail(worker)}`);
    });
}

let sentinels = 0;

/**
 * The bot's messages in a channel since `mark`, once a message sent after them is answered: a chat's
 * messages are answered in order and its replies delivered in order, so anything still to come for
 * the earlier ones (a doubled reply, a late part) is among them. The sentinel's own answer is left out.
 */
async function settledSince(channelId: string, mark: number, from: FakeUser, inGuild = false): Promise<BotMessage[]> {
  const text = `settle ${++sentinels}`;
  if (inGuild) discord.sendMessage({ channelId, from, content: mention(text) });
  else discord.sendDM({ from, content: text });
  const answer = await replyWith(channelId, mark, new RegExp(`^echo: (\\[[^\\]]*\\] )?${text}$`));
  const all = since(channelId, mark);
  return all.slice(0, all.indexOf(answer));
}

/** Waits until the gateway acknowledged every reply on the bus (acknowledged entries are deleted). */
async function outboundDelivered(): Promise<void> {
  const stream = `{${prefix}}:out:discord`;
  for (let attempt = 0; attempt < 200 && (await redis.xlen(stream)) > 0; attempt++) await pause(50);
  expect(await redis.xlen(stream)).toBe(0);
}

const modelSaw = (text: string) => llm.requests.some((request) => JSON.stringify(request.body).includes(text));

describe("Discord through gateway and worker processes", () => {
  it("answers a DM with the model's reply, threaded to the message", async () => {
    const chatId = discord.dmChannelId(owner);
    const mark = discord.sentIn(chatId).length;
    const message = discord.sendDM({ from: owner, content: "hello bot" });
    const reply = await replyWith(chatId, mark, "echo: hello bot");
    expect(reply.replyTo).toBe(message.id);
    expect(reply.nonce).toEqual(expect.any(String));
    const create = discord.requests.find((request) => request.route === "createMessage" && request.path.includes(chatId))!;
    expect(create.body).toMatchObject({ enforce_nonce: true, allowed_mentions: { parse: ["users"], replied_user: true } });
    expect(discord.requests.some((request) => request.route === "typing" && request.path.includes(chatId))).toBe(true);
    expect(await settledSince(chatId, mark, owner)).toHaveLength(1);
  });

  it("answers a voice message from its transcript, marked as transcribed", async () => {
    const chatId = discord.dmChannelId(listener);
    const mark = discord.sentIn(chatId).length;
    const uploads = llm.transcriptions.length;
    const message = discord.sendVoiceDM({ from: listener, bytes: VOICE, durationSecs: 2.5 });
    const reply = await replyWith(chatId, mark, "echo: [voice message, transcribed] which planet is the largest");
    expect(reply.replyTo).toBe(message.id);
    const upload = llm.transcriptions[uploads]!;
    expect(upload).toMatchObject({ model: "whisper-1", fileName: "voice-message.ogg", fileType: "audio/ogg" });
    expect(upload.bytes.equals(VOICE)).toBe(true);
    expect(modelSaw("[voice message, transcribed] which planet is the largest")).toBe(true);
  });

  it("refuses a voice message over the duration cap in one line, without transcribing it", async () => {
    const chatId = discord.dmChannelId(listener);
    const mark = discord.sentIn(chatId).length;
    const uploads = llm.transcriptions.length;
    discord.sendVoiceDM({ from: listener, bytes: VOICE, durationSecs: 90 });
    await replyWith(chatId, mark, "Your voice message is 1 min 30 s long; I can transcribe up to 1 min. Please send a shorter one or type it.");
    expect(await settledSince(chatId, mark, listener)).toHaveLength(1);
    expect(llm.transcriptions.length).toBe(uploads);
  });

  it("in a guild channel ignores an unmentioned message and answers a mention as a reply in the same channel", async () => {
    const channelId = guild.generalId;
    const mark = discord.sentIn(channelId).length;
    discord.sendMessage({ channelId, from: owner, content: "just chatting among humans" });
    const asked = discord.sendMessage({ channelId, from: owner, content: mention("ping") });
    // In a guild channel the model reads who spoke (a speaker label) before the text.
    const reply = await replyWith(channelId, mark, `echo: [Owner (discord:${owner.id})] ping`);
    expect(reply.replyTo).toBe(asked.id);
    expect(modelSaw("just chatting among humans")).toBe(false);
  });

  it("lets in a member by an allowed role, and ignores a stranger in the guild without a word", async () => {
    const channelId = guild.generalId;
    const mark = discord.sentIn(channelId).length;
    discord.sendMessage({ channelId, from: stranger, content: mention("let me in") });
    discord.sendMessage({ channelId, from: helper, content: mention("role check") });
    await replyWith(channelId, mark, `echo: [helper (discord:${helper.id})] role check`);
    expect((await settledSince(channelId, mark, owner, true)).map((message) => message.content)).toEqual([`echo: [helper (discord:${helper.id})] role check`]);
    expect(modelSaw("let me in")).toBe(false);
  });

  it("keeps a thread's conversation in its own session", async () => {
    const thread = discord.addThread(guild, guild.generalId, "a topic");
    const channelMark = discord.sentIn(guild.generalId).length;
    discord.sendMessage({ channelId: thread.id, from: owner, content: mention("hello thread") });
    await replyWith(thread.id, 0, `echo: [Owner (discord:${owner.id})] hello thread`);
    discord.sendMessage({ channelId: thread.id, from: owner, content: mention("how many things did I say?") });
    // One message before in the thread; the channel's own messages are another session's.
    await replyWith(thread.id, 0, "you said 1 things before");
    expect(since(guild.generalId, channelMark)).toEqual([]);
  });

  it("takes the slash commands: /help answered by the gateway, /new by the worker, each as a reply to the command", async () => {
    expect(discord.commands.map((command) => command.name).sort()).toEqual(["help", "new", "status", "stop"]);
    const channelId = guild.generalId;
    const mark = discord.sentIn(channelId).length;
    discord.sendCommand({ from: owner, name: "help", channelId });
    const help = await replyWith(channelId, mark, helpText);
    expect(help.replyTo).toBe(since(channelId, mark).find((message) => message.command === "help")!.id);
    discord.sendCommand({ from: stranger, name: "status", channelId });
    const chatId = discord.dmChannelId(second);
    const dmMark = discord.sentIn(chatId).length;
    discord.sendCommand({ from: second, name: "new" });
    const started = await replyWith(chatId, dmMark, "Started a new conversation.");
    expect(started.replyTo).toBe(since(chatId, dmMark).find((message) => message.command === "new")!.id);
    // The stranger's invocation was dropped, and its echo withdrawn.
    expect((await settledSince(channelId, mark, owner, true)).map((message) => message.content)).toEqual(["/help", helpText]);
  });

  it("sends a 5,000-character reply as ≤2,000-character parts, in order, with the code block intact", async () => {
    const chatId = discord.dmChannelId(owner);
    const mark = discord.sentIn(chatId).length;
    discord.sendDM({ from: owner, content: "give me a long reply" });
    await discord.waitFor(() => since(chatId, mark).some((message) => message.content.includes("line 39")) || undefined, { timeoutMs: 40_000, what: "the last part" });
    const parts = await settledSince(chatId, mark, owner);
    expect(parts.length).toBeGreaterThanOrEqual(3);
    for (const part of parts) {
      expect(part.content.length).toBeLessThanOrEqual(2_000);
      expect((part.content.match(/```/g) ?? []).length % 2).toBe(0);
    }
    const joined = parts.map((part) => part.content).join("\n");
    for (let index = 0; index < 40; index++) expect(joined).toContain(`console.log("line ${index}");`);
    expect(joined.indexOf("line 0")).toBeLessThan(joined.indexOf("line 39"));
  });

  it("waits out a 429 and delivers the reply once", async () => {
    const chatId = discord.dmChannelId(second);
    const mark = discord.sentIn(chatId).length;
    discord.failNext("createMessage", { status: 429, retryAfter: 1 });
    discord.sendDM({ from: second, content: "after the rate limit" });
    await replyWith(chatId, mark, "echo: after the rate limit");
    expect(await settledSince(chatId, mark, second)).toHaveLength(1);
    expect(discord.requests.some((request) => request.route === "createMessage" && request.status === 429)).toBe(true);
  });

  it("answers a MESSAGE_CREATE replayed to a restarted gateway only once", async () => {
    const chatId = discord.dmChannelId(second);
    const mark = discord.sentIn(chatId).length;
    const message = discord.sendDM({ from: second, content: "say this once" });
    await replyWith(chatId, mark, "echo: say this once");
    // The draft may show the whole text before the final is through: restart once it is delivered.
    await outboundDelivered();
    await gateway.stop();
    gateway = startService(["gateway"], env);
    await gateway.waitForLog(/discord channel started/);
    discord.replay(message);
    discord.sendDM({ from: second, content: "and this after the restart" });
    await replyWith(chatId, mark, "echo: and this after the restart");
    expect((await settledSince(chatId, mark, second)).map((item) => item.content)).toEqual(["echo: say this once", "echo: and this after the restart"]);
    expect(llm.requests.filter((request) => lastUser(request.body).includes("say this once"))).toHaveLength(1);
  });

  it("delivers the reply exactly once when the leading gateway is killed mid-turn and another takes over", async () => {
    const standby = startService(["gateway"], env);
    await standby.waitForLog(/standing for the leader lease/);
    const chatId = discord.dmChannelId(second);
    const mark = discord.sentIn(chatId).length;
    discord.sendDM({ from: second, content: "the crash job" });
    await discord.waitFor(() => modelSaw("the crash job") || undefined, { timeoutMs: 20_000, what: "the model call" });
    await gateway.stop("SIGKILL");
    gateway = standby;
    await gateway.waitForLog(/discord channel started/, 40_000);
    await replyWith(chatId, mark, "survived the crash");
    expect((await settledSince(chatId, mark, second)).map((item) => item.content)).toEqual(["survived the crash"]);
  });

  it("edits the draft message into the final when the gateway showing it is killed mid-stream", async () => {
    const standby = startService(["gateway"], env);
    await standby.waitForLog(/standing for the leader lease/);
    const chatId = discord.dmChannelId(second);
    const mark = discord.sentIn(chatId).length;
    discord.sendDM({ from: second, content: "the crash draft" });
    const draft = await replyWith(chatId, mark, "the draft shows this text");
    // Killed once the draft message is recorded on the bus (the record follows the platform's
    // answer to the create: a crash in between is the one window left, see the README).
    const recorded = async () => (await redis.keys(`{${prefix}}:draftmsg:discord:*`)).length > 0;
    for (let attempt = 0; attempt < 200 && !(await recorded()); attempt++) await pause(50);
    expect(await recorded()).toBe(true);
    await gateway.stop("SIGKILL");
    const killedAt = discord.requests.length;
    gateway = standby;
    await gateway.waitForLog(/discord channel started/, 40_000);
    // The final, edited into the draft message by the gateway that took over.
    const finalEdit = () => discord.requests.slice(killedAt).find((request) => request.route === "editMessage" && request.path.includes(draft.id));
    await discord.waitFor(() => finalEdit(), { timeoutMs: 30_000, what: "the final edited into the draft message" }).catch((error: unknown) => {
      throw new Error(`${String(error)}\nsent: ${JSON.stringify(since(chatId, mark))}\n--- gateway ---\n${gateway.output().slice(-4_000)}`);
    });
    expect((await settledSince(chatId, mark, second)).map((item) => item.content)).toEqual(["the draft shows this text"]);
  });

  it("resumes a dropped gateway connection and answers what comes next", async () => {
    const chatId = discord.dmChannelId(owner);
    const mark = discord.sentIn(chatId).length;
    const resumed = () => (gateway.output().match(/discord gateway connection back \(session resumed\)/g) ?? []).length;
    const before = resumed();
    discord.dropConnections();
    discord.sendDM({ from: owner, content: "said while the socket was down" });
    await discord.waitFor(() => resumed() > before || undefined, { timeoutMs: 20_000, what: "the resume" });
    // Replayed on the resume, and answered.
    await replyWith(chatId, mark, "echo: said while the socket was down");
    discord.sendDM({ from: owner, content: "after the resume" });
    await replyWith(chatId, mark, "echo: after the resume");
    expect(gateway.output()).toMatch(/discord gateway connection lost; reconnecting/);
  });
});

describe("Discord voice without transcription configured", () => {
  it("says in one plain line that voice is not set up, and calls no model", async () => {
    await gateway.stop();
    const configFile = path.join(root, "no-voice.json");
    await writeFile(configFile, JSON.stringify({ redis: { prefix, leaseTtlMs: 2_000 }, agent: { providerRetries: 0 }, channels: { discord: { enabled: true, allowFrom: [listener.id] } } }));
    gateway = startService(["gateway"], { ...env, COUNTBOT_CONFIG: configFile });
    await gateway.waitForLog(/discord channel started/, 40_000);
    const chatId = discord.dmChannelId(listener);
    const mark = discord.sentIn(chatId).length;
    const [calls, uploads] = [llm.requests.length, llm.transcriptions.length];
    discord.sendVoiceDM({ from: listener, bytes: VOICE, durationSecs: 3 });
    await replyWith(chatId, mark, "Voice messages are not set up on this bot, so I can't listen to this one. Please type your message instead.");
    expect(await settledSince(chatId, mark, listener)).toHaveLength(1);
    expect([llm.requests.length - 1, llm.transcriptions.length]).toEqual([calls, uploads]);
  });
});
