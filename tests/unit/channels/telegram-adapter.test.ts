import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { type TelegramAdapterOptions, type WebhookHandler, createTelegramAdapter } from "../../../channels/telegram/telegram-adapter.js";
import { ChannelError } from "../../../src/errors.js";
import type { PlatformEvent } from "../../../src/gateway/channel.js";
import { type FakeTelegramServer, startFakeTelegram } from "../../support/fake-telegram-server.js";

const TOKEN = "123456:AAH-test_token-do-not-leak";
const WEBHOOK_SECRET = "webhook_secret-42";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startTelegram(): Promise<FakeTelegramServer> {
  const telegram = await startFakeTelegram({ token: TOKEN, bot: { username: "CountBot" } });
  cleanups.push(() => telegram.close());
  return telegram;
}

/** A local HTTP server standing in for the gateway's: it mounts whatever handler the adapter registers. */
async function startWebhookServer() {
  let handler: WebhookHandler | undefined;
  const server = createServer((incoming, response) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const answer = handler ? handler(incoming.headers, Buffer.concat(chunks)) : Promise.resolve({ status: 404, error: "no handler" });
      void answer.then((result) => {
        response.writeHead(result.status, { "content-type": "application/json" });
        response.end(JSON.stringify(result.error ? { error: result.error } : { ok: true }));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/telegram/webhook`;
  return { url, register: (registered: WebhookHandler) => (handler = registered) };
}

async function setup(telegram: FakeTelegramServer, overrides: Partial<TelegramAdapterOptions> = {}) {
  const downloadDir = await mkdtemp(join(tmpdir(), "countbot-telegram-"));
  const logLines: string[] = [];
  const logger = pino({ level: "debug" }, { write: (line: string) => void logLines.push(line) });
  const adapter = createTelegramAdapter({
    token: TOKEN,
    apiRoot: telegram.apiRoot,
    mode: "polling",
    maxFileBytes: 1_000_000,
    downloadDir,
    logger,
    now: () => 1_000,
    pollTimeoutSeconds: 5,
    ...overrides,
  });
  const events: PlatformEvent[] = [];
  cleanups.push(async () => {
    await adapter.stop();
    await rm(downloadDir, { recursive: true, force: true });
    // Whatever happened in the test, the token never reached a log line.
    expect(logLines.join("\n")).not.toContain(TOKEN);
  });
  return { adapter, events, downloadDir, logLines, sink: async (event: PlatformEvent) => (events.push(event), "published" as const) };
}

async function started(telegram: FakeTelegramServer, overrides: Partial<TelegramAdapterOptions> = {}) {
  const context = await setup(telegram, overrides);
  await context.adapter.start(context.sink);
  return context;
}

function nthEvent(telegram: FakeTelegramServer, events: PlatformEvent[], count: number): Promise<PlatformEvent> {
  return telegram.waitFor(() => events[count - 1], { what: `event #${count}` });
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

describe("Telegram adapter: inbound over long polling", () => {
  it("turns a DM into a PlatformEvent", async () => {
    const telegram = await startTelegram();
    const { events } = await started(telegram);
    const alice = telegram.user({ id: 42, first_name: "Alice", last_name: "Liddell", username: "alice" });
    const update = telegram.sendText({ chatId: 42, from: alice, text: "hello there" });
    const event = await nthEvent(telegram, events, 1);
    expect(event).toEqual({
      eventId: String(update.update_id),
      chatId: "42",
      chatType: "private",
      senderId: "42",
      senderName: "Alice Liddell",
      senderIsBot: false,
      text: "hello there",
      mentionsBot: false,
      repliesToBot: false,
      platformMessageId: String(update.message!.message_id),
      media: [],
      receivedAt: 1_000,
    });
    // getMe gave the bot's identity, and only messages are asked for.
    const polls = telegram.requests.filter((request) => request.method === "getUpdates");
    expect(polls[0]?.params.allowed_updates).toEqual(["message"]);
  });

  it("delivers events in order and confirms each update with the next offset", async () => {
    const telegram = await startTelegram();
    const { events } = await started(telegram);
    const bob = telegram.user({ id: 7 });
    const first = telegram.sendText({ chatId: 7, from: bob, text: "one" });
    const second = telegram.sendText({ chatId: 7, from: bob, text: "two" });
    await nthEvent(telegram, events, 2);
    expect(events.map((event) => event.text)).toEqual(["one", "two"]);
    await telegram.waitFor(() => telegram.requests.some((request) => request.method === "getUpdates" && request.params.offset === second.update_id + 1));
    expect(second.update_id).toBe(first.update_id + 1);
  });

  it("sees a mention by @username and by text_mention entity in a group, never by the plain text", async () => {
    const telegram = await startTelegram();
    const { events } = await started(telegram);
    const carol = telegram.user({ id: 9, first_name: "Carol" });
    telegram.sendText({ chatId: -100, from: carol, text: "nobody asked you" });
    telegram.sendText({ chatId: -100, from: carol, text: "hey @countbot, what is up?" });
    telegram.sendText({ chatId: -100, from: carol, text: "hey Count, look", entities: [{ type: "text_mention", offset: 4, length: 5, user: telegram.botUser }] });
    telegram.sendText({ chatId: -100, from: carol, text: "no entities but @CountBot", entities: [] });
    telegram.sendText({ chatId: -100, from: carol, text: "ask @CountBotFan instead" });
    await nthEvent(telegram, events, 5);
    expect(events.map((event) => [event.chatType, event.mentionsBot])).toEqual([
      ["group", false],
      ["group", true],
      ["group", true],
      ["group", false],
      ["group", false],
    ]);
    expect(events[1]!.text).toBe("hey @countbot, what is up?");
  });

  it("reads addressing from the entities only: @CountBot in code, in a pre block or without an entity does not count", async () => {
    const telegram = await startTelegram();
    const { events } = await started(telegram);
    const carol = telegram.user({ id: 9, first_name: "Carol" });
    const other = telegram.user({ id: 10, first_name: "CountBot" });
    const at = (text: string, part: string) => text.indexOf(part);
    const spellings: Array<[string, Array<{ type: string; offset: number; length: number; user?: unknown }>, boolean]> = [
      ["@CountBot real", [{ type: "mention", offset: 0, length: 9 }], true],
      ["/new@CountBot", [{ type: "bot_command", offset: 0, length: 13 }], true],
      ["hey CountBot", [{ type: "text_mention", offset: 4, length: 8, user: telegram.botUser }], true],
      ["run `@CountBot` now", [{ type: "code", offset: at("run `@CountBot` now", "`"), length: 11 }], false],
      ["inline @CountBot code", [{ type: "code", offset: 7, length: 9 }, { type: "mention", offset: 7, length: 9 }], false],
      ["```\n@CountBot\n```", [{ type: "pre", offset: 0, length: 16 }, { type: "mention", offset: 4, length: 9 }], false],
      ["/new@CountBot as code", [{ type: "code", offset: 0, length: 13 }], false],
      ["plain @CountBot, no entity", [], false],
      ["hey CountBot", [{ type: "text_mention", offset: 4, length: 8, user: other }], false],
      ["@CountBotFan", [{ type: "mention", offset: 0, length: 12 }], false],
      ["@countbot lower case", [{ type: "mention", offset: 0, length: 9 }], true],
    ];
    for (const [text, entities] of spellings) telegram.sendText({ chatId: -100, from: carol, text, entities: entities as never });
    await nthEvent(telegram, events, spellings.length);
    expect(events.map((event) => event.mentionsBot)).toEqual(spellings.map(([, , addressed]) => addressed));
    expect(events[6]!.text).toBe("/new@CountBot as code");
  });

  it("keeps commands for another bot as not addressed to us, and strips our own name from a command", async () => {
    const telegram = await startTelegram();
    const { events } = await started(telegram);
    const dave = telegram.user({ id: 11 });
    telegram.sendText({ chatId: -200, from: dave, text: "/new@OtherBot please" });
    telegram.sendText({ chatId: -200, from: dave, text: "/new@CountBot" });
    await nthEvent(telegram, events, 2);
    expect(events[0]).toMatchObject({ text: "/new@OtherBot please", mentionsBot: false });
    expect(events[1]).toMatchObject({ text: "/new", mentionsBot: true });
  });

  it("flags a reply to the bot, and a message from another bot", async () => {
    const telegram = await startTelegram();
    const { adapter, events } = await started(telegram);
    const erin = telegram.user({ id: 12 });
    telegram.addChat({ id: -300, type: "supergroup", title: "Team" });
    const { platformMessageId } = await adapter.send("-300", "I am the bot", { format: "plain" });
    const botMessage = telegram.messageOf(-300, Number(platformMessageId))!;
    telegram.sendText({ chatId: -300, from: erin, text: "answering you", replyToMessage: botMessage });
    const ownMessage = telegram.sendText({ chatId: -300, from: erin, text: "my own" }).message!;
    telegram.sendText({ chatId: -300, from: erin, text: "answering myself", replyToMessage: ownMessage });
    const helper = telegram.user({ id: 99, is_bot: true, first_name: "HelperBot", username: "helper_bot" });
    telegram.sendText({ chatId: -300, from: helper, text: "beep @CountBot" });
    await nthEvent(telegram, events, 4);
    expect(events.map((event) => [event.repliesToBot, event.senderIsBot])).toEqual([
      [true, false],
      [false, false],
      [false, false],
      [false, true],
    ]);
    expect(events[3]).toMatchObject({ senderId: "99", mentionsBot: true });
  });

  it("downloads the largest size of a photo and passes it as image media", async () => {
    const telegram = await startTelegram();
    const { events, downloadDir } = await started(telegram);
    const bytes = randomBytes(5_000);
    telegram.sendPhoto({ chatId: 42, from: telegram.user({ id: 42 }), bytes, caption: "what is this?" });
    const event = await nthEvent(telegram, events, 1);
    expect(event.text).toBe("what is this?");
    expect(event.media).toHaveLength(1);
    const [media] = event.media;
    expect(media).toMatchObject({ kind: "image", mimeType: "image/jpeg" });
    expect(media!.path.startsWith(downloadDir)).toBe(true);
    expect((await readFile(media!.path)).equals(bytes)).toBe(true);
  });

  it("passes a document with its name and type", async () => {
    const telegram = await startTelegram();
    const { events } = await started(telegram);
    const bytes = Buffer.from("%PDF-1.7 a small report");
    telegram.sendDocument({ chatId: 42, from: telegram.user({ id: 42 }), bytes, fileName: "../report 1.pdf", mimeType: "application/pdf" });
    const event = await nthEvent(telegram, events, 1);
    expect(event.media[0]).toMatchObject({ kind: "document", mimeType: "application/pdf", name: "../report 1.pdf" });
    expect(event.media[0]!.path).not.toContain("..");
    expect((await readFile(event.media[0]!.path)).equals(bytes)).toBe(true);
  });

  it("passes a voice note and an audio file as audio media with their duration, for the gateway to transcribe", async () => {
    const telegram = await startTelegram();
    const { events } = await started(telegram);
    const from = telegram.user({ id: 42 });
    const voice = Buffer.from("OggS voice note");
    telegram.sendVoice({ chatId: 42, from, bytes: voice, duration: 7 });
    telegram.sendVoice({ chatId: 42, from, bytes: Buffer.from("ID3 song"), duration: 185, as: "audio", caption: "listen" });
    await nthEvent(telegram, events, 2);
    expect(events[0]!.text).toBe("");
    expect(events[0]!.media).toEqual([expect.objectContaining({ kind: "audio", mimeType: "audio/ogg", durationSeconds: 7 })]);
    expect((await readFile(events[0]!.media[0]!.path)).equals(voice)).toBe(true);
    expect(events[1]!.text).toBe("listen");
    expect(events[1]!.media).toEqual([expect.objectContaining({ kind: "audio", mimeType: "audio/mpeg", durationSeconds: 185 })]);
  });

  it("turns a document over the size cap into a note, whether its size is announced or not", async () => {
    const telegram = await startTelegram();
    const { events, downloadDir } = await started(telegram, { maxFileBytes: 1_000 });
    const from = telegram.user({ id: 42 });
    telegram.sendDocument({ chatId: 42, from, bytes: randomBytes(5_000), fileName: "big.zip", caption: "see attached" });
    telegram.sendDocument({ chatId: 42, from, bytes: randomBytes(5_000), fileName: "sneaky.bin", declaredSize: null });
    await nthEvent(telegram, events, 2);
    expect(events[0]!.media).toEqual([]);
    expect(events[0]!.text).toBe('see attached\n\n[document "big.zip" not downloaded: 4.9 KB is over the 1000 B limit]');
    expect(events[1]!.media).toEqual([]);
    expect(events[1]!.text).toBe('[document "sneaky.bin" not downloaded: it is over the 1000 B limit]');
    // The announced size spared the getFile call; the unannounced one was cut while streaming and left nothing behind.
    expect(telegram.requests.filter((request) => request.method === "getFile")).toHaveLength(1);
    expect(await readdir(downloadDir).catch(() => [])).toEqual([]);
  });

  it("retries an update whose hand-off failed, without losing it", async () => {
    const telegram = await startTelegram();
    const context = await setup(telegram);
    let failed = false;
    await context.adapter.start(async (event) => {
      if (!failed) {
        failed = true;
        throw new Error("bus unavailable");
      }
      context.events.push(event);
      return "published";
    });
    telegram.sendText({ chatId: 42, from: telegram.user({ id: 42 }), text: "persist me" });
    const event = await nthEvent(telegram, context.events, 1);
    expect(event.text).toBe("persist me");
    expect(context.events).toHaveLength(1);
  });

  it("honours a 429 on getUpdates and a webhook left behind by an earlier deployment", async () => {
    const telegram = await startTelegram();
    await fetch(`${telegram.apiRoot}/bot${TOKEN}/setWebhook`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ url: "https://old.example/hook" }) });
    telegram.failNext("getUpdates", { error_code: 429, retry_after: 1 });
    const { events } = await started(telegram);
    expect(telegram.webhook).toBeUndefined();
    telegram.sendText({ chatId: 42, from: telegram.user({ id: 42 }), text: "still here" });
    await nthEvent(telegram, events, 1);
    expect(telegram.requests.filter((request) => request.method === "getUpdates")[0]?.failed?.error_code).toBe(429);
  });

  it("stop() ends polling: no getUpdates after it resolved", async () => {
    const telegram = await startTelegram();
    const { adapter, events } = await started(telegram);
    await telegram.waitFor(() => telegram.pendingPolls === 1, { what: "a held getUpdates" });
    await adapter.stop();
    await telegram.waitFor(() => telegram.pendingPolls === 0, { what: "the held getUpdates to be dropped" });
    const polls = telegram.requests.filter((request) => request.method === "getUpdates").length;
    telegram.sendText({ chatId: 42, from: telegram.user({ id: 42 }), text: "too late" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(telegram.requests.filter((request) => request.method === "getUpdates")).toHaveLength(polls);
    expect(events).toEqual([]);
  });
});

describe("Telegram adapter: webhook", () => {
  async function webhookAdapter(telegram: FakeTelegramServer) {
    const server = await startWebhookServer();
    const context = await started(telegram, { mode: "webhook", webhook: { url: server.url, secret: WEBHOOK_SECRET, path: "/telegram/webhook", register: server.register } });
    return { ...context, server };
  }

  it("registers the webhook with its secret and publishes only what carries the right secret", async () => {
    const telegram = await startTelegram();
    const { events, server } = await webhookAdapter(telegram);
    expect(telegram.webhook).toEqual({ url: server.url, secretToken: WEBHOOK_SECRET });
    const update = telegram.textUpdate({ chatId: 42, from: telegram.user({ id: 42 }), text: "via webhook" });

    expect((await telegram.deliverWebhook(update, { secret: null })).status).toBe(401);
    expect((await telegram.deliverWebhook(update, { secret: "webhook_secret-43" })).status).toBe(403);
    expect((await telegram.deliverWebhook(update, { secret: "short" })).status).toBe(403);
    expect(events).toEqual([]);

    expect((await telegram.deliverWebhook(update)).status).toBe(200);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ eventId: String(update.update_id), text: "via webhook", chatType: "private" });
    expect(telegram.requests.some((request) => request.method === "getUpdates")).toBe(false);
  });

  it("answers 400 naming the problem for a bad body, and publishes nothing", async () => {
    const telegram = await startTelegram();
    const { events } = await webhookAdapter(telegram);
    const wrongType = await telegram.deliverWebhook({ update_id: "seven" });
    expect(wrongType.status).toBe(400);
    expect(wrongType.text).toContain("update_id: expected a number");
    const missingChat = await telegram.deliverWebhook({ update_id: 1, message: { message_id: 1, date: 0, text: "hi" } });
    expect(missingChat.status).toBe(400);
    expect(missingChat.text).toContain("message.chat");
    const notJson = await telegram.deliverWebhook(undefined, { rawBody: "{not json" });
    expect(notJson).toMatchObject({ status: 400 });
    expect(notJson.text).toContain("expected JSON");
    expect(events).toEqual([]);
  });

  it("acknowledges updates it does not handle, and refuses updates once stopped", async () => {
    const telegram = await startTelegram();
    const { adapter, events } = await webhookAdapter(telegram);
    expect((await telegram.deliverWebhook({ update_id: 5, edited_message: { message_id: 1 } })).status).toBe(200);
    await adapter.stop();
    const update = telegram.textUpdate({ chatId: 42, from: telegram.user({ id: 42 }), text: "after stop" });
    expect((await telegram.deliverWebhook(update)).status).toBe(503);
    expect(events).toEqual([]);
  });
});

describe("Telegram adapter: outbound", () => {
  async function withChat() {
    const telegram = await startTelegram();
    const context = await started(telegram);
    const alice = telegram.user({ id: 42, first_name: "Alice" });
    const incoming = telegram.sendText({ chatId: 42, from: alice, text: "question" });
    await nthEvent(telegram, context.events, 1);
    return { telegram, ...context, incoming };
  }

  it("sends formatted text as HTML, threaded to the message it answers", async () => {
    const { telegram, adapter, incoming } = await withChat();
    const { platformMessageId } = await adapter.send("42", "<b>bold</b> answer", { format: "formatted", replyTo: String(incoming.message!.message_id) });
    await adapter.send("42", "1 < 2 <b>not markup</b>", { format: "plain" });
    const messages = telegram.sent.filter((item) => item.method === "sendMessage");
    expect(messages[0]).toMatchObject({ chatId: 42, text: "<b>bold</b> answer", parseMode: "HTML", replyToMessageId: incoming.message!.message_id });
    expect(messages[0]!.params.reply_parameters).toEqual({ message_id: incoming.message!.message_id, allow_sending_without_reply: true });
    expect(String(messages[0]!.messageId)).toBe(platformMessageId);
    expect(messages[1]).toMatchObject({ text: "1 < 2 <b>not markup</b>", parseMode: undefined });
  });

  it("maps a rejected markup to kind formatting", async () => {
    const { telegram, adapter } = await withChat();
    const unbalanced = await channelError(adapter.send("42", "<b>never closed", { format: "formatted" }));
    expect(unbalanced.kind).toBe("formatting");
    telegram.rejectParseMode();
    expect((await channelError(adapter.send("42", "<b>fine</b>", { format: "formatted" }))).kind).toBe("formatting");
    await expect(adapter.send("42", "<b>fine</b>", { format: "plain" })).resolves.toBeDefined();
  });

  it("maps 429 to rate-limit with retryAfterMs, and the other refusals to their kinds", async () => {
    const { telegram, adapter } = await withChat();
    telegram.failNext("sendMessage", { error_code: 429, retry_after: 7 });
    const limited = await channelError(adapter.send("42", "hi", { format: "plain" }));
    expect(limited).toMatchObject({ kind: "rate-limit", retryAfterMs: 7_000, channel: "telegram" });

    telegram.failNext("sendMessage", { error_code: 403, description: "Forbidden: bot was blocked by the user" });
    expect((await channelError(adapter.send("42", "hi", { format: "plain" }))).kind).toBe("forbidden");
    expect((await channelError(adapter.send("42", "x".repeat(5_000), { format: "plain" }))).kind).toBe("too-long");
    expect((await channelError(adapter.send("777", "hi", { format: "plain" }))).kind).toBe("not-found");
    expect((await channelError(adapter.edit("42", "99999", "hi", { format: "plain" }))).kind).toBe("not-found");
    telegram.failNext("sendMessage", { error_code: 500 });
    expect((await channelError(adapter.send("42", "hi", { format: "plain" }))).kind).toBe("network");
  });

  it("edits a message, and an edit that changes nothing is a success", async () => {
    const { telegram, adapter } = await withChat();
    const { platformMessageId } = await adapter.send("42", "draft one", { format: "plain" });
    await adapter.edit("42", platformMessageId, "draft <i>two</i>", { format: "formatted" });
    await adapter.edit("42", platformMessageId, "draft <i>two</i>", { format: "formatted" });
    const edits = telegram.sent.filter((item) => item.method === "editMessageText");
    expect(edits).toHaveLength(1);
    expect(edits[0]).toMatchObject({ messageId: Number(platformMessageId), text: "draft <i>two</i>", parseMode: "HTML" });
    expect(telegram.requests.filter((request) => request.method === "editMessageText")[1]?.failed?.description).toContain("message is not modified");
  });

  it("streams a draft with sendMessageDraft and shows typing", async () => {
    const { telegram, adapter } = await withChat();
    expect(adapter.capabilities).toMatchObject({ maxMessageLength: 4096, streaming: "draft" });
    expect(adapter.render?.("**bold** <x>")).toEqual({ text: "<b>bold</b> &lt;x&gt;", format: "formatted" });
    expect(adapter.measure?.("**bold**")).toBe(4);
    await adapter.draft("42", 17, "partial answ");
    await adapter.typing("42");
    await adapter.typing("404");
    const draft = telegram.requests.find((request) => request.method === "sendMessageDraft");
    expect(draft?.params).toMatchObject({ chat_id: 42, draft_id: 17, text: "partial answ" });
    expect(telegram.sent.filter((item) => item.method === "sendChatAction")).toEqual([expect.objectContaining({ chatId: 42, action: "typing" })]);
  });

  it("reports an unreachable API as a network error without the token", async () => {
    const telegram = await startTelegram();
    const { adapter } = await setup(telegram, { apiRoot: "http://127.0.0.1:9/" });
    const error = await channelError(adapter.send("42", "hi", { format: "plain" }));
    expect(error.kind).toBe("network");
    expect(String((error.cause as Error).stack)).not.toContain(TOKEN);
    expect((await channelError(adapter.start(async () => "published"))).kind).toBe("network");
  });
});
