/** Slack's events as PlatformEvents: chats and threads, mentions from Slack's tokens, readable text, files with caps, duplicates answered once. */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createFileDownloader } from "../../../channels/slack/file-download.js";
import { type InboundContext, mentionsBot, placeOf, readableText, toPlatformEvent } from "../../../channels/slack/inbound-event.js";
import { createInboundQueue } from "../../../channels/slack/inbound-queue.js";
import { type EventCallback, type MessageEvent, MessageEventSchema } from "../../../channels/slack/payloads.js";
import type { PlatformEvent } from "../../../src/gateway/kit/index.js";
import { type FakeSlackServer, startFakeSlack } from "../../support/fake-slack-server.js";

const silent = pino({ level: "silent" });
const BOT = "U0BOT00001";
const names: Record<string, string> = { U0ALICE001: "Alice", U0BOB00002: "Bob" };
const message = (fields: Partial<MessageEvent> & Record<string, unknown>): MessageEvent =>
  MessageEventSchema.parse({ type: "message", channel: "C0GENERAL1", user: "U0ALICE001", text: "hello", ts: "1700000000.000100", ...fields });

function context(overrides: Partial<InboundContext> = {}): InboundContext {
  return {
    botUserId: BOT,
    botName: "countbot",
    nameOf: async (id) => names[id],
    download: async (file) => ({ note: `[file "${file.name}" could not be downloaded]` }),
    answeredIn: () => false,
    threadStart: async () => undefined,
    inheritParent: true,
    filesUnaddressed: false,
    now: () => 1,
    ...overrides,
  };
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe("Slack inbound events", () => {
  it("reads Slack's text as a person does: mentions by name, user groups, channels, links, entities", async () => {
    const text = "<@U0BOT00001> ask <@U0BOB00002> and <!subteam^S0TEAM|@analysts> in <#C0OPS0001|ops>: see <https://example.com/a|the doc>, <mailto:a@b.c|a@b.c> &amp; a &lt; b";
    expect(await readableText(text, context())).toBe("@countbot ask @Bob and @analysts in #ops: see the doc (https://example.com/a), a@b.c & a < b");
    expect(await readableText("<@U0NOBODY1> <!here>", context())).toBe("@U0NOBODY1 @here");
  });

  it("sees the bot mentioned only by its user id token or an app_mention", () => {
    expect(mentionsBot(message({ text: "<@U0BOT00001> hi" }), BOT)).toBe(true);
    expect(mentionsBot(message({ text: "@countbot hi <@U0BOB00002>" }), BOT)).toBe(false);
    expect(mentionsBot(message({ type: "app_mention", text: "hi" }), BOT)).toBe(true);
  });

  it("places DMs, channels and threads: a thread is its own chat, a DM's thread stays private", () => {
    expect(placeOf(message({ channel: "D0ALICE001", channel_type: "im" }))).toEqual({ chatId: "D0ALICE001", chatType: "private" });
    expect(placeOf(message({ channel_type: "channel" }))).toEqual({ chatId: "C0GENERAL1", chatType: "group" });
    // The parent message of a thread is a channel message.
    expect(placeOf(message({ thread_ts: "1700000000.000100" }))).toEqual({ chatId: "C0GENERAL1", chatType: "group" });
    expect(placeOf(message({ thread_ts: "1699999999.000001", ts: "1700000000.000200" }))).toEqual({ chatId: "C0GENERAL1:1699999999.000001", chatType: "thread", parent: "C0GENERAL1" });
    expect(placeOf(message({ channel: "D0ALICE001", thread_ts: "1699999999.000001" })).chatType).toBe("private");
  });

  it("builds a thread's event: the channel as scope and parent, replies to the bot's thread, the sender named", async () => {
    const signal = new AbortController().signal;
    const inThread = message({ thread_ts: "1699999999.000001", parent_user_id: BOT, text: "<@U0BOT00001> more", ts: "1700000000.000300" });
    const event = await toPlatformEvent(inThread, context(), signal);
    expect(event).toMatchObject({
      eventId: "C0GENERAL1:1700000000.000300",
      chatId: "C0GENERAL1:1699999999.000001",
      chatType: "thread",
      senderId: "U0ALICE001",
      senderName: "Alice",
      scopes: ["channel:C0GENERAL1"],
      text: "@countbot more",
      mentionsBot: true,
      repliesToBot: true,
      platformMessageId: "1700000000.000300",
      metadata: { slackChannel: "C0GENERAL1", parentChatId: "C0GENERAL1" },
    });
    const other = await toPlatformEvent(message({ thread_ts: "1699999999.000001", parent_user_id: "U0BOB00002", ts: "1700000000.000400" }), context({ inheritParent: false }), signal);
    expect(other.repliesToBot).toBe(false);
    expect(other.metadata).not.toHaveProperty("parentChatId");
    const answered = await toPlatformEvent(message({ thread_ts: "1699999999.000001", parent_user_id: "U0BOB00002", ts: "1700000000.000500" }), context({ answeredIn: () => true }), signal);
    expect(answered.repliesToBot).toBe(true);
    const bot = await toPlatformEvent(message({ user: undefined, bot_id: "B0OTHER001", subtype: "bot_message" }), context(), signal);
    expect(bot.senderIsBot).toBe(true);
  });

  it("tells the model once what a thread started from, when someone else's message started it", async () => {
    const signal = new AbortController().signal;
    const asked: string[] = [];
    const threadStart: InboundContext["threadStart"] = async (chatId) => (asked.push(chatId), asked.length === 1 ? { text: "Deploy failed &amp; <@U0BOB00002> is on it", userId: "U0ALICE001" } : undefined);
    const reply = (text: string, ts: string) => message({ thread_ts: "1699999999.000001", ts, text });
    const first = await toPlatformEvent(reply("<@U0BOT00001> what went wrong?", "1700000000.000600"), context({ threadStart }), signal);
    expect(first.text).toBe('@countbot what went wrong?\n\n(This thread started from a message by Alice: "Deploy failed & @Bob is on it")');
    const second = await toPlatformEvent(reply("<@U0BOT00001> and now?", "1700000000.000700"), context({ threadStart }), signal);
    expect(second.text).toBe("@countbot and now?");
    // Chatter in a thread is not worth a call.
    await toPlatformEvent(reply("among ourselves", "1700000000.000800"), context({ threadStart }), signal);
    expect(asked).toEqual(["C0GENERAL1:1699999999.000001", "C0GENERAL1:1699999999.000001"]);
  });

  it("fetches files only where the bot is addressed, unless every channel message is answered", async () => {
    const signal = new AbortController().signal;
    const fetched: string[] = [];
    const download: InboundContext["download"] = async (file) => (fetched.push(file.id), { note: `[file ${file.id}]` });
    const withFile = (fields: Record<string, unknown>) => message({ files: [{ id: `F${fetched.length}${String(fields.text)}` }], ...fields });
    await toPlatformEvent(withFile({ text: "chatter" }), context({ download }), signal);
    await toPlatformEvent(withFile({ text: "<@U0BOT00001> look" }), context({ download }), signal);
    await toPlatformEvent(withFile({ text: "dm", channel: "D0ALICE001" }), context({ download }), signal);
    await toPlatformEvent(withFile({ text: "all" }), context({ download, filesUnaddressed: true }), signal);
    expect(fetched).toEqual(["F0<@U0BOT00001> look", "F1dm", "F2all"]);
  });

  it("hands each message to the sink once: Slack's retries, and the same message as message and app_mention", async () => {
    const seen: PlatformEvent[] = [];
    let now = 1_700_000_000_000;
    const queue = createInboundQueue({ context: context(), botId: () => "B0BOT00001", notifyDropped: async () => undefined, logger: silent, now: () => now });
    queue.open(async (event) => (seen.push(event), "published"));
    const callback = (event: Record<string, unknown>, id: string): EventCallback => ({ type: "event_callback", event_id: id, event_time: now / 1000, event: { type: "message", ...event } });
    const said = { channel: "C0GENERAL1", user: "U0ALICE001", text: "<@U0BOT00001> hi", ts: "1700000000.000100" };
    queue.event(callback(said, "Ev1"));
    queue.event(callback(said, "Ev1"), 1);
    queue.event(callback({ ...said, type: "app_mention" }, "Ev2"));
    // The bot's own message, a join, and an event older than 12 hours.
    queue.event(callback({ channel: "C0GENERAL1", user: BOT, text: "mine", ts: "1700000000.000200" }, "Ev3"));
    queue.event(callback({ channel: "C0GENERAL1", user: "U0BOB00002", subtype: "channel_join", text: "joined", ts: "1700000000.000300" }, "Ev4"));
    now += 13 * 60 * 60_000;
    queue.event({ ...callback({ channel: "C0GENERAL1", user: "U0BOB00002", text: "old", ts: "1700000000.000400" }, "Ev5"), event_time: 1_700_000_000 });
    queue.command({ command: "/new", text: "", user_id: "U0ALICE001", channel_id: "D0ALICE001", trigger_id: "t.1" });
    queue.command({ command: "/new", text: "", user_id: "U0ALICE001", channel_id: "D0ALICE001", trigger_id: "t.1" });
    await queue.close();
    // Two chats: each in its own order, not one after the other.
    expect(seen.map((event) => [event.chatId, event.text]).sort()).toEqual([
      ["C0GENERAL1", "@countbot hi"],
      ["D0ALICE001", "/new"],
    ]);
    expect(seen.find((event) => event.chatId === "D0ALICE001")).toMatchObject({ chatType: "private", mentionsBot: true, eventId: "slash:t.1" });
  });
});

describe("Slack file downloads", () => {
  async function rig(): Promise<{ fake: FakeSlackServer; dir: string; download: ReturnType<typeof createFileDownloader>["download"] }> {
    const fake = await startFakeSlack({ botToken: "xoxb-files-token", appToken: "xapp-files-token" });
    const dir = await mkdtemp(path.join(tmpdir(), "countbot-slack-files-"));
    cleanups.push(async () => {
      await fake.close();
      await rm(dir, { recursive: true, force: true });
    });
    const { download } = createFileDownloader({ botToken: "xoxb-files-token", downloadDir: dir, maxImageBytes: 1_000, maxFileBytes: 2_000, allowedHosts: ["127.0.0.1"], logger: silent });
    return { fake, dir, download };
  }

  it("downloads a file with the bot token within its cap, and notes one over it", async () => {
    const { fake, download } = await rig();
    const signal = new AbortController().signal;
    const image = fake.addFile({ id: "F0IMAGE001", name: "chart.png", mimetype: "image/png", bytes: Buffer.alloc(800, 1) });
    const got = await download(image, signal);
    expect(got).toMatchObject({ media: { kind: "image", mimeType: "image/png", name: "chart.png" } });
    expect((await readFile((got as { media: { path: string } }).media.path)).length).toBe(800);
    const big = fake.addFile({ id: "F0IMAGE002", name: "big.png", mimetype: "image/png", bytes: Buffer.alloc(1_500, 1) });
    expect(await download(big, signal)).toEqual({ note: '[image "big.png" not downloaded: 1.5 KB is over the 1000 B limit]' });
    // The event announced it smaller than it is: the download's own length says otherwise.
    expect(await download({ ...big, size: 10 }, signal)).toEqual({ note: '[image "big.png" not downloaded: 1.5 KB is over the 1000 B limit]' });
    const doc = fake.addFile({ id: "F0DOC00001", name: "notes.pdf", mimetype: "application/pdf", bytes: Buffer.alloc(1_500, 2) });
    expect(await download(doc, signal)).toMatchObject({ media: { kind: "document", name: "notes.pdf" } });
  });

  it("sends the token only to Slack's file host, and notes a file it could not fetch", async () => {
    const { fake, download } = await rig();
    const signal = new AbortController().signal;
    const file = fake.addFile({ id: "F0ELSE0001", name: "x.txt", mimetype: "text/plain", bytes: Buffer.from("x") });
    const elsewhere = { ...file, url_private_download: file.url_private_download.replace("127.0.0.1", "localhost") };
    expect(await download(elsewhere, signal)).toEqual({ note: '[file "x.txt" could not be downloaded]' });
    expect(await download({ ...file, mode: "external" }, signal)).toEqual({ note: '[file "x.txt" could not be downloaded]' });
    const { download: withoutToken } = createFileDownloader({ botToken: "xoxb-wrong", downloadDir: "/tmp/unused", maxImageBytes: 10, maxFileBytes: 10, allowedHosts: ["127.0.0.1"], logger: silent });
    // Slack answers a sign-in page to a wrong token.
    expect(await withoutToken(file, signal)).toEqual({ note: '[file "x.txt" could not be downloaded]' });
  });
});
