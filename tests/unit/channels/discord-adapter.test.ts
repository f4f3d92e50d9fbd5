/**
 * The Discord adapter with the real discord.js against the fake Discord (REST + WebSocket gateway
 * on loopback).
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { DROPPED_NOTICE, type DiscordAdapterOptions, createDiscordAdapter, nonceOf } from "../../../channels/discord/discord-adapter.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import { BusError, ChannelError } from "../../../src/errors.js";
import type { PlatformEvent } from "../../../src/gateway/channel.js";
import { createDispatcher } from "../../../src/gateway/dispatcher.js";
import { type FakeDiscordServer, type FakeGuild, type FakeUser, startFakeDiscord } from "../../support/fake-discord-server.js";

const TOKEN = "MTIzNDU2Nzg5.discord-test.token-do-not-leak";
const PNG = Buffer.from("89504e470d0a1a0a0000000d4948445200000001000000010806000000", "hex");

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startDiscord(): Promise<FakeDiscordServer> {
  const discord = await startFakeDiscord({ token: TOKEN });
  cleanups.push(() => discord.close());
  return discord;
}

async function setup(discord: FakeDiscordServer, overrides: Partial<DiscordAdapterOptions> = {}) {
  const downloadDir = await mkdtemp(join(tmpdir(), "countbot-discord-"));
  const logLines: string[] = [];
  const logger = pino({ level: "debug" }, { write: (line: string) => void logLines.push(line) });
  const adapter = createDiscordAdapter({ token: TOKEN, apiRoot: discord.apiRoot, maxImageBytes: 1_000_000, downloadDir, logger, now: () => 1_000, ...overrides });
  const events: PlatformEvent[] = [];
  cleanups.push(async () => {
    await adapter.stop();
    await rm(downloadDir, { recursive: true, force: true });
    // Whatever happened in the test, the token never reached a log line.
    expect(logLines.join("\n")).not.toContain(TOKEN);
  });
  const logged = (message: RegExp) => logLines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((record) => message.test(String(record.msg)));
  return { adapter, events, downloadDir, logLines, logged, sink: async (event: PlatformEvent) => (events.push(event), "published" as const) };
}

async function started(discord: FakeDiscordServer, overrides: Partial<DiscordAdapterOptions> = {}) {
  const context = await setup(discord, overrides);
  await context.adapter.start(context.sink);
  return context;
}

function nthEvent(discord: FakeDiscordServer, events: PlatformEvent[], count: number): Promise<PlatformEvent> {
  return discord.waitFor(() => events[count - 1], { what: `event #${count}` });
}

async function channelError(promise: Promise<unknown>): Promise<ChannelError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ChannelError);
  expect((error as Error).message).not.toContain(TOKEN);
  return error as ChannelError;
}

/** A guild with Alice in it (role "helpers"), set up before the client connects. */
function team(discord: FakeDiscordServer): { guild: FakeGuild; alice: FakeUser; helpers: string } {
  const guild = discord.addGuild({ name: "Team" });
  const alice = discord.user({ username: "alice", globalName: "Alice" });
  const helpers = discord.addRole(guild, "helpers").id;
  discord.addMember(guild, alice, [helpers]);
  return { guild, alice, helpers };
}

describe("Discord adapter: inbound", () => {
  it("turns a DM into a private event", async () => {
    const discord = await startDiscord();
    const { events, adapter } = await started(discord);
    expect(adapter.identity).toEqual({ id: discord.botUser.id, username: "CountBot" });
    const alice = discord.user({ username: "alice", globalName: "Alice" });
    const message = discord.sendDM({ from: alice, content: "hello there" });
    expect(await nthEvent(discord, events, 1)).toEqual({
      eventId: message.id,
      chatId: discord.dmChannelId(alice),
      chatType: "private",
      senderId: alice.id,
      senderName: "Alice",
      senderIsBot: false,
      text: "hello there",
      mentionsBot: false,
      repliesToBot: false,
      platformMessageId: message.id,
      media: [],
      receivedAt: 1_000,
    });
    // The intents the bot needs, Message Content included.
    const identify = discord.gateway.received.find((frame) => frame.op === 2)!.d as { intents: number };
    expect(identify.intents & ((1 << 0) | (1 << 9) | (1 << 12) | (1 << 15))).toBe((1 << 0) | (1 << 9) | (1 << 12) | (1 << 15));
  });

  it("in a guild channel: a group event with exact mention flags, the mention stripped, and scopes", async () => {
    const discord = await startDiscord();
    const { guild, alice, helpers } = team(discord);
    const { events } = await started(discord);
    const bot = discord.botUser.id;
    const channelId = guild.generalId;
    discord.sendMessage({ channelId, from: alice, content: "nobody asked you" });
    discord.sendMessage({ channelId, from: alice, content: `<@${bot}> what is up?` });
    discord.sendMessage({ channelId, from: alice, content: `hey <@!${bot}>, look` });
    discord.sendMessage({ channelId, from: alice, content: "@everyone and @here are not the bot" });
    discord.sendMessage({ channelId, from: alice, content: `<@&${guild.botRoleId}> by role` });
    discord.sendMessage({ channelId, from: alice, content: `<@&${helpers}> ping the helpers` });
    await nthEvent(discord, events, 6);
    expect(events.map((event) => [event.chatType, event.mentionsBot, event.text])).toEqual([
      ["group", false, "nobody asked you"],
      ["group", true, "what is up?"],
      ["group", true, "hey look"],
      ["group", false, "@everyone and @here are not the bot"],
      ["group", true, "by role"],
      ["group", false, "@helpers ping the helpers"],
    ]);
    expect(events[0]).toMatchObject({ chatId: channelId, senderId: alice.id, scopes: [`guild:${guild.id}`, `channel:${channelId}`, `role:${helpers}`] });
  });

  it("reads addressing from Discord's mention list, never the text: escaped and code spellings do not count", async () => {
    const discord = await startDiscord();
    const { guild, alice } = team(discord);
    const { events } = await started(discord);
    const bot = discord.botUser.id;
    const spellings: Array<[string, boolean]> = [
      [`<@${bot}> real`, true],
      [`real too <@!${bot}>`, true],
      [`<@&${guild.botRoleId}> by role`, true],
      [`\\<@${bot}> escaped`, false],
      [`\\<@!${bot}> escaped nickname form`, false],
      [`\\<@&${guild.botRoleId}> escaped role`, false],
      [`inline \`<@${bot}>\` code`, false],
      [`double \`\`<@${bot}>\`\` code`, false],
      ["```\n<@" + bot + ">\n``` block", false],
      ["```js\nping(<@&" + guild.botRoleId + ">)\n```", false],
      ["@CountBot by name only", false],
      [`<@${alice.id}> someone else`, false],
    ];
    for (const [content] of spellings) discord.sendMessage({ channelId: guild.generalId, from: alice, content });
    await nthEvent(discord, events, spellings.length);
    expect(events.map((event) => event.mentionsBot)).toEqual(spellings.map(([, addressed]) => addressed));
    // An escaped or quoted mention is kept as written: it is part of what the user said.
    expect(events[3]!.text).toBe(`\\<@${bot}> escaped`);
  });

  it("flags a reply to the bot, not a reply to someone else", async () => {
    const discord = await startDiscord();
    const { guild, alice } = team(discord);
    const { adapter, events } = await started(discord);
    const { platformMessageId } = await adapter.send(guild.generalId, "I am the bot", { format: "plain" });
    const botMessage = discord.messageOf(guild.generalId, platformMessageId)!;
    discord.sendMessage({ channelId: guild.generalId, from: alice, content: "answering you", replyTo: botMessage, replyPing: false });
    const own = discord.sendMessage({ channelId: guild.generalId, from: alice, content: "my own" });
    discord.sendMessage({ channelId: guild.generalId, from: alice, content: "answering myself", replyTo: own });
    await nthEvent(discord, events, 3);
    expect(events.map((event) => [event.text, event.repliesToBot, event.mentionsBot])).toEqual([
      ["answering you", true, false],
      ["my own", false, false],
      ["answering myself", false, false],
    ]);
  });

  it("makes a thread its own chat, with its parent channel among the scopes", async () => {
    const discord = await startDiscord();
    const { guild, alice } = team(discord);
    const early = discord.addThread(guild, guild.generalId, "known at connect");
    const { events } = await started(discord, { inheritParent: true });
    const late = discord.addThread(guild, guild.generalId, "created later");
    discord.sendMessage({ channelId: early.id, from: alice, content: "in the first thread" });
    discord.sendMessage({ channelId: late.id, from: alice, content: `<@${discord.botUser.id}> in the second` });
    await nthEvent(discord, events, 2);
    expect(events[0]).toMatchObject({ chatId: early.id, chatType: "thread", metadata: { parentChatId: guild.generalId } });
    expect(events[0]!.scopes).toEqual(expect.arrayContaining([`channel:${early.id}`, `channel:${guild.generalId}`, `guild:${guild.id}`]));
    expect(events[1]).toMatchObject({ chatId: late.id, chatType: "thread", mentionsBot: true, text: "in the second" });
  });

  it("flags other bots and never passes on its own messages", async () => {
    const discord = await startDiscord();
    const { guild } = team(discord);
    const { adapter, events } = await started(discord);
    const helper = discord.user({ username: "helper", bot: true });
    await adapter.send(guild.generalId, "my own words", { format: "plain" });
    discord.sendMessage({ channelId: guild.generalId, from: helper, content: `<@${discord.botUser.id}> beep` });
    const event = await nthEvent(discord, events, 1);
    expect(event).toMatchObject({ senderId: helper.id, senderIsBot: true, mentionsBot: true });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(events).toHaveLength(1);
  });

  it("downloads an image as media, and names other files and oversized images in the text", async () => {
    const discord = await startDiscord();
    const { events, downloadDir } = await started(discord, { maxImageBytes: 1_000 });
    const alice = discord.user({ username: "alice" });
    const photo = discord.attachment(PNG, { filename: "cat.png", contentType: "image/png" });
    const pdf = discord.attachment(Buffer.from("%PDF-1.7"), { filename: "report.pdf", contentType: "application/pdf" });
    const big = discord.attachment(randomBytes(5_000), { filename: "huge.jpg", contentType: "image/jpeg" });
    const lying = discord.attachment(randomBytes(5_000), { filename: "../sneaky.png", contentType: "image/png", declaredSize: 10 });
    discord.sendDM({ from: alice, content: "what is this?", attachments: [photo, pdf, big, lying] });
    const event = await nthEvent(discord, events, 1);
    expect(event.media).toEqual([{ path: expect.stringContaining(downloadDir), kind: "image", mimeType: "image/png", name: "cat.png" }]);
    expect((await readFile(event.media[0]!.path)).equals(PNG)).toBe(true);
    expect(event.text).toBe(
      [
        "what is this?",
        '[file "report.pdf" attached (application/pdf, 8 B): not downloaded]',
        '[image "huge.jpg" not downloaded: 4.9 KB is over the 1000 B limit]',
        '[image "../sneaky.png" not downloaded: it is over the 1000 B limit]',
      ].join("\n\n"),
    );
    expect(await readdir(downloadDir)).toEqual([expect.stringMatching(/-cat\.png$/)]);
  });

  it("downloads a voice message as audio with its duration, and an audio file as audio; caps them like images", async () => {
    const discord = await startDiscord();
    const { events } = await started(discord, { maxImageBytes: 1_000 });
    const alice = discord.user({ username: "alice" });
    const voice = Buffer.from("OggS a voice message");
    discord.sendVoiceDM({ from: alice, bytes: voice, durationSecs: 3.5 });
    const song = discord.attachment(Buffer.from("ID3 song"), { filename: "song.mp3", contentType: "audio/mpeg" });
    const long = discord.attachment(randomBytes(5_000), { filename: "talk.ogg", contentType: "audio/ogg" });
    discord.sendDM({ from: alice, content: "", attachments: [song, long] });
    await nthEvent(discord, events, 2);
    expect(events[0]!.media).toEqual([{ path: expect.any(String), kind: "audio", mimeType: "audio/ogg", name: "voice-message.ogg", durationSeconds: 3.5 }]);
    expect((await readFile(events[0]!.media[0]!.path)).equals(voice)).toBe(true);
    expect(events[1]!.media).toEqual([expect.objectContaining({ kind: "audio", mimeType: "audio/mpeg", name: "song.mp3" })]);
    expect(events[1]!.text).toBe('[audio file "talk.ogg" not downloaded: 4.9 KB is over the 1000 B limit]');
  });

  it("does not fetch an attachment URL outside Discord's CDN", async () => {
    const discord = await startDiscord();
    const { events, logged } = await started(discord);
    const alice = discord.user({ username: "alice" });
    const elsewhere = { ...discord.attachment(PNG, { filename: "x.png", contentType: "image/png" }), url: "http://localhost:9/x.png" };
    discord.sendDM({ from: alice, content: "look", attachments: [elsewhere] });
    const event = await nthEvent(discord, events, 1);
    expect(event).toMatchObject({ media: [], text: 'look\n\n[image "x.png" could not be downloaded]' });
    expect(logged(/not on Discord's CDN/)).toHaveLength(1);
  });

  it("logs and drops events it cannot read, and goes on", async () => {
    const discord = await startDiscord();
    const { guild } = team(discord);
    const { events, logged } = await started(discord);
    discord.dispatch("MESSAGE_CREATE", { id: "5", channel_id: guild.generalId });
    discord.dispatch("MESSAGE_CREATE", { id: "6", channel_id: guild.generalId, guild_id: guild.id, author: "nobody" });
    discord.dispatch("MESSAGE_CREATE", { id: "7", channel_id: "777", author: { id: "2", username: "b" }, channel_type: 1, content: "x", attachments: 5 });
    discord.dispatch("THREAD_CREATE", { garbage: true });
    const alice = discord.user({ username: "alice" });
    discord.sendDM({ from: alice, content: "still alive" });
    expect((await nthEvent(discord, events, 1)).text).toBe("still alive");
    const dropped = logged(/discord event not understood; dropped/);
    expect(dropped.map((record) => record.type)).toEqual(expect.arrayContaining(["MESSAGE_CREATE"]));
    expect(dropped.length).toBeGreaterThanOrEqual(3);
  });

  it("tells the sender when their message could not be handed over after every retry, where the bot was addressed", async () => {
    const discord = await startDiscord();
    const { guild, alice } = team(discord);
    const context = await setup(discord, { handOverBackoffMs: 1 });
    let tries = 0;
    await context.adapter.start(async () => {
      tries += 1;
      throw new BusError("Redis is not reachable (connection reconnecting); nothing was stored", "unavailable");
    });
    const question = discord.sendDM({ from: alice, content: "are you there?" });
    discord.sendMessage({ channelId: guild.generalId, from: alice, content: "talking to the others" });
    const dm = discord.dmChannelId(alice);
    await discord.waitFor(() => discord.sentIn(dm)[0], { what: "the notice" });
    expect(discord.sentIn(dm)).toEqual([expect.objectContaining({ content: DROPPED_NOTICE, replyTo: question.id })]);
    await discord.waitFor(() => context.logged(/could not be handed over; dropped/).length === 2 || undefined, { what: "both dropped" });
    expect(tries).toBe(10);
    // Not addressed in the group: dropped without a word there.
    expect(discord.sentIn(guild.generalId)).toEqual([]);
  });

  it("stops receiving on stop(), and starts again", async () => {
    const discord = await startDiscord();
    const { adapter, events, sink } = await started(discord);
    const alice = discord.user({ username: "alice" });
    await adapter.stop();
    await discord.waitFor(() => discord.gateway.openSockets === 0, { what: "the socket to close" });
    discord.sendDM({ from: alice, content: "too late" });
    await adapter.start(sink);
    discord.sendDM({ from: alice, content: "back again" });
    expect((await nthEvent(discord, events, 1)).text).toBe("back again");
    expect(events).toHaveLength(1);
  });
});

describe("Discord adapter: outbound", () => {
  it("replies with a message reference, a nonce and allowed mentions that ping no roles or @everyone", async () => {
    const discord = await startDiscord();
    const { adapter } = await started(discord);
    const alice = discord.user({ username: "alice" });
    const question = discord.sendDM({ from: alice, content: "question" });
    const chatId = discord.dmChannelId(alice);
    const { platformMessageId } = await adapter.send(chatId, "**answer**", { format: "formatted", replyTo: question.id, idempotencyKey: "out-1#0" });
    expect(discord.sentIn(chatId)).toEqual([expect.objectContaining({ id: platformMessageId, content: "**answer**", replyTo: question.id, nonce: nonceOf("out-1#0") })]);
    const call = discord.requests.find((request) => request.route === "createMessage")!;
    expect(call.body).toEqual({
      content: "**answer**",
      message_reference: { message_id: question.id, fail_if_not_exists: false },
      nonce: nonceOf("out-1#0"),
      enforce_nonce: true,
      allowed_mentions: { parse: ["users"], replied_user: true },
    });
    expect(nonceOf("a".repeat(500)).length).toBeLessThanOrEqual(25);
    // A reply to a message that is gone still lands.
    await adapter.send(chatId, "still here", { format: "plain", replyTo: "1234567890" });
    expect(discord.sentIn(chatId).map((message) => message.content)).toEqual(["**answer**", "still here"]);
  });

  it("shows a chunk sent twice with the same idempotency key once", async () => {
    const discord = await startDiscord();
    const { adapter } = await started(discord);
    const chatId = discord.dmChannelId(discord.user({ username: "alice" }));
    const first = await adapter.send(chatId, "exactly once", { format: "plain", idempotencyKey: "reply-7#0" });
    const again = await adapter.send(chatId, "exactly once", { format: "plain", idempotencyKey: "reply-7#0" });
    await adapter.send(chatId, "exactly once", { format: "plain", idempotencyKey: "reply-7#1" });
    expect(again.platformMessageId).toBe(first.platformMessageId);
    expect(discord.sentIn(chatId)).toHaveLength(2);
  });

  it("sends 5,000 characters through the dispatcher as ≤2,000-character parts, in order, code fences intact", async () => {
    const discord = await startDiscord();
    const { adapter } = await started(discord);
    const chatId = discord.dmChannelId(discord.user({ username: "alice" }));
    const bus = createMemoryBus();
    const dispatcher = createDispatcher({ bus, adapter, logger: pino({ level: "silent" }) });
    cleanups.push(async () => {
      await dispatcher.stop();
      await bus.close();
    });
    await dispatcher.start();
    const prose = "This sentence makes the reply long enough to need three Discord messages. ".repeat(25);
    const code = Array.from({ length: 60 }, (_, index) => `console.log("line ${index}");`).join("\n");
    const text = `${prose}\n\n\`\`\`js\n${code}\n\`\`\`\n\n${prose}`;
    expect(text.length).toBeGreaterThan(5_000);
    await bus.publishOutbound({ id: "turn-1:1", channel: "discord", chatId, content: text, kind: "final", media: [], metadata: {} });
    const parts = await discord.waitFor(() => (discord.sentIn(chatId).length >= 3 ? discord.sentIn(chatId) : undefined), { what: "three parts" });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(discord.sentIn(chatId)).toHaveLength(parts.length);
    for (const part of parts) {
      expect(part.content.length).toBeLessThanOrEqual(2_000);
      expect((part.content.match(/```/g) ?? []).length % 2).toBe(0);
    }
    const joined = parts.map((part) => part.content).join("\n");
    for (let index = 0; index < 60; index++) expect(joined).toContain(`console.log("line ${index}");`);
    expect(joined.indexOf("line 0")).toBeLessThan(joined.indexOf("line 59"));
  });

  it("hands a 429 Discord sent back at once, naming the budget it hit, and the retry lands once", async () => {
    const discord = await startDiscord();
    const { adapter } = await started(discord);
    const chatId = discord.dmChannelId(discord.user({ username: "alice" }));
    // Retried inside the REST client, the 429 would reach no other gateway: it comes back to the
    // dispatcher, whose send governor closes the budget for all of them.
    discord.failNext("createMessage", { status: 429, retryAfter: 1 });
    const error = await channelError(adapter.send(chatId, "after the limit", { format: "plain", idempotencyKey: "limited#0" }));
    expect(error).toMatchObject({ kind: "rate-limit", scope: "channel" });
    expect(error.retryAfterMs).toBeGreaterThanOrEqual(1_000);
    discord.failNext("createMessage", { status: 429, retryAfter: 1, global: true });
    expect(await channelError(adapter.send(chatId, "after the limit", { format: "plain", idempotencyKey: "limited#0" }))).toMatchObject({ kind: "rate-limit", scope: "bot" });
    await adapter.send(chatId, "after the limit", { format: "plain", idempotencyKey: "limited#0" });
    const creates = discord.requests.filter((request) => request.route === "createMessage");
    expect(creates.map((request) => request.status)).toEqual([429, 429, 200]);
    expect(discord.sentIn(chatId).map((message) => message.content)).toEqual(["after the limit"]);
  });

  it("hands a long 429 back as a rate-limit error with retryAfterMs", async () => {
    const discord = await startDiscord();
    const { adapter } = await started(discord, { maxRestWaitMs: 2_000 });
    const chatId = discord.dmChannelId(discord.user({ username: "alice" }));
    discord.failNext("createMessage", { status: 429, retryAfter: 30 });
    const startedAt = Date.now();
    const error = await channelError(adapter.send(chatId, "hi", { format: "plain" }));
    expect(error.kind).toBe("rate-limit");
    expect(error.retryAfterMs).toBeGreaterThanOrEqual(30_000);
    expect(Date.now() - startedAt).toBeLessThan(2_000);
    expect(discord.requests.filter((request) => request.route === "createMessage").map((request) => request.status)).toEqual([429]);
  });

  it("maps Discord's refusals to their kinds", async () => {
    const discord = await startDiscord();
    const { adapter } = await started(discord);
    const chatId = discord.dmChannelId(discord.user({ username: "alice" }));
    expect((await channelError(adapter.send("404404404", "hi", { format: "plain" }))).kind).toBe("not-found");
    expect((await channelError(adapter.edit(chatId, "404404404", "hi", { format: "plain" }))).kind).toBe("not-found");
    expect((await channelError(adapter.send(chatId, "x".repeat(2_001), { format: "plain" }))).kind).toBe("too-long");
    discord.failNext("createMessage", { status: 403, code: 50007, message: "Cannot send messages to this user" });
    expect((await channelError(adapter.send(chatId, "hi", { format: "plain" }))).kind).toBe("forbidden");
  });

  it("edits a message, shows typing, and reports an unreachable API as a network error without the token", async () => {
    const discord = await startDiscord();
    const { adapter } = await started(discord);
    const chatId = discord.dmChannelId(discord.user({ username: "alice" }));
    const { platformMessageId } = await adapter.send(chatId, "draft one", { format: "plain" });
    await adapter.edit(chatId, platformMessageId, "draft *two*", { format: "formatted" });
    await adapter.typing(chatId);
    await adapter.typing("404404404");
    expect(discord.sentIn(chatId)).toEqual([expect.objectContaining({ content: "draft *two*", previous: ["draft one"] })]);
    expect(discord.requests.filter((request) => request.route === "typing").map((request) => request.status)).toEqual([204, 404]);
    const { adapter: offline } = await setup(discord, { apiRoot: "http://127.0.0.1:9/api" });
    const error = await channelError(offline.send(chatId, "hi", { format: "plain" }));
    expect(error.kind).toBe("network");
    expect(String((error.cause as Error).stack)).not.toContain(TOKEN);
  }, 30_000);
});

describe("Discord adapter: gateway reconnects", () => {
  it("fails start() with a hint when the Message Content intent is not enabled for the bot", async () => {
    const discord = await startFakeDiscord({ token: TOKEN, privilegedIntents: false });
    cleanups.push(() => discord.close());
    const { adapter } = await setup(discord);
    const error = await channelError(adapter.start(async () => "published"));
    expect(error.message).toContain("4014");
    expect(error.message).toContain("Message Content intent");
  });

  it("fails start() on a refused token", async () => {
    const discord = await startDiscord();
    const { adapter } = await setup(discord, { token: "another.token.entirely" });
    const error = await channelError(adapter.start(async () => "published"));
    expect(error.message).toMatch(/token/i);
  });

  it("resumes a dropped connection: what was said meanwhile is replayed, and later messages arrive", async () => {
    const discord = await startDiscord();
    const { adapter, events, logged } = await started(discord);
    const alice = discord.user({ username: "alice" });
    discord.dropConnections();
    discord.sendDM({ from: alice, content: "while you were away" });
    await nthEvent(discord, events, 1);
    await discord.waitFor(() => adapter.connectionStats().resumes === 1, { what: "the resume" });
    discord.sendDM({ from: alice, content: "after the resume" });
    await nthEvent(discord, events, 2);
    expect(events.map((event) => event.text)).toEqual(["while you were away", "after the resume"]);
    expect(discord.handshakes()).toEqual(["identify", "resume"]);
    expect(discord.gateway.received.filter((frame) => frame.op === 6).map((frame) => frame.via)).toEqual(["resume"]);
    expect(adapter.connectionStats()).toMatchObject({ reconnects: 1, resumes: 1, identifies: 1, forcedIdentifies: 0 });
    expect(logged(/reconnecting/)).toHaveLength(1);
  });

  it("identifies afresh after INVALID_SESSION, without a restart", async () => {
    const discord = await startDiscord();
    const { adapter, events, logged } = await started(discord);
    const alice = discord.user({ username: "alice" });
    discord.invalidateSessions(false);
    await discord.waitFor(() => adapter.connectionStats().identifies === 2, { what: "a second identify" });
    discord.sendDM({ from: alice, content: "after the new session" });
    expect((await nthEvent(discord, events, 1)).text).toBe("after the new session");
    expect(discord.handshakes()).toEqual(["identify", "identify"]);
    expect(logged(/session invalidated/)).toEqual([expect.objectContaining({ resumable: false })]);
  });

  it("falls back to a fresh identify after three failed resumes", async () => {
    const discord = await startDiscord();
    const { adapter, events, logged } = await started(discord);
    const alice = discord.user({ username: "alice" });
    discord.failResumes(3, "drop");
    discord.dropConnections();
    await discord.waitFor(() => adapter.connectionStats().identifies === 2, { what: "the fresh identify", timeoutMs: 20_000 });
    discord.sendDM({ from: alice, content: "a new session works" });
    expect((await nthEvent(discord, events, 1)).text).toBe("a new session works");
    expect(discord.handshakes()).toEqual(["identify", "resume", "resume", "resume", "identify"]);
    expect(adapter.connectionStats()).toMatchObject({ reconnects: 4, forcedIdentifies: 1 });
    expect(logged(/resumes keep failing/)).toHaveLength(1);
  }, 30_000);

  it("falls back to a fresh identify when INVALID_SESSION keeps allowing a resume that keeps failing", async () => {
    const discord = await startDiscord();
    const { adapter, events } = await started(discord);
    const alice = discord.user({ username: "alice" });
    discord.failResumes(10, "invalid-resumable");
    discord.dropConnections();
    await discord.waitFor(() => adapter.connectionStats().identifies === 2, { what: "the fresh identify", timeoutMs: 20_000 });
    discord.sendDM({ from: alice, content: "a new session works" });
    expect((await nthEvent(discord, events, 1)).text).toBe("a new session works");
    expect(discord.handshakes()).toEqual(["identify", "resume", "resume", "resume", "identify"]);
    expect(adapter.connectionStats()).toMatchObject({ forcedIdentifies: 1, invalidSessions: 3 });
  }, 30_000);
});

describe("Discord adapter: slash commands", () => {
  it("registers /new /stop /status /help and turns an invocation into the typed command, threaded to its echo", async () => {
    const discord = await startDiscord();
    const { guild, alice, helpers } = team(discord);
    const { events } = await started(discord, { registerCommands: true });
    expect(discord.commands.map((command) => command.name)).toEqual(["new", "stop", "status", "help"]);
    expect(discord.commands[0]).toMatchObject({ type: 1, contexts: [0, 1], description: expect.any(String) });
    const inDm = discord.sendCommand({ from: alice, name: "new" });
    const inGuild = discord.sendCommand({ from: alice, name: "help", channelId: guild.generalId });
    await nthEvent(discord, events, 2);
    const dmEcho = discord.sentIn(discord.dmChannelId(alice))[0]!;
    expect(dmEcho).toMatchObject({ content: "/new", command: "new" });
    expect(events[0]).toEqual({
      eventId: inDm.id,
      chatId: discord.dmChannelId(alice),
      chatType: "private",
      senderId: alice.id,
      senderName: "Alice",
      senderIsBot: false,
      text: "/new",
      mentionsBot: true,
      repliesToBot: false,
      platformMessageId: dmEcho.id,
      media: [],
      receivedAt: 1_000,
    });
    expect(events[1]).toMatchObject({ eventId: inGuild.id, chatId: guild.generalId, chatType: "group", text: "/help", mentionsBot: true });
    expect(events[1]!.scopes).toEqual([`guild:${guild.id}`, `channel:${guild.generalId}`, `role:${helpers}`]);
    // The echo of the bot's own answer came back over the gateway and was not taken for a message.
    expect(events).toHaveLength(2);
  });

  it("deletes the echo when admission drops the invocation", async () => {
    const discord = await startDiscord();
    const { guild, alice } = team(discord);
    const context = await setup(discord, { registerCommands: true });
    await context.adapter.start(async (event) => (context.events.push(event), "ignored:not-allowed"));
    discord.sendCommand({ from: alice, name: "status", channelId: guild.generalId });
    await nthEvent(discord, context.events, 1);
    await discord.waitFor(() => discord.requests.some((request) => request.route === "deleteResponse" && request.status === 204) || undefined, { what: "the echo deleted" });
    expect(discord.sentIn(guild.generalId)).toEqual([]);
  });

  it("takes no invocations without registerCommands", async () => {
    const discord = await startDiscord();
    const { events } = await started(discord);
    discord.sendCommand({ from: discord.user({ username: "alice" }), name: "new" });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(events).toEqual([]);
    expect(discord.commands).toEqual([]);
    expect(discord.requests.some((request) => request.route === "interactionCallback")).toBe(false);
  });
});
