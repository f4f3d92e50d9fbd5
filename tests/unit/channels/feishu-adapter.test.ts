/**
 * The Feishu adapter against the fake open platform, through the real SDK: the long connection,
 * inbound parsing, replies as cards, the SDK's two error shapes, card limits.
 */
import { readFile } from "node:fs/promises";
import { afterEach, describe, expect, it } from "vitest";
import { ChannelError } from "../../../src/errors.js";
import type { FakeUser } from "../../support/fake-feishu-server.js";
import { type Cleanup, feishuAdapter, startFeishu, textOf } from "./feishu-support.js";

const cleanups: Cleanup[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const alice: FakeUser = { openId: "ou_alice000000000000000000000000001", userId: "alice01", name: "Alice" };
const bob: FakeUser = { openId: "ou_bob00000000000000000000000000002", name: "Bob" };
const P2P = "oc_p2p0000000000000000000000000001";
const GROUP = "oc_group00000000000000000000000001";
const PNG = Buffer.from("89504e470d0a1a0a0000000d4948445200000001000000010806000000", "hex");

async function connected(overrides: Parameters<typeof feishuAdapter>[2] = {}) {
  const feishu = await startFeishu(cleanups);
  const context = await feishuAdapter(cleanups, feishu, overrides);
  await context.adapter.start(context.sink);
  return { feishu, ...context };
}

describe("Feishu adapter: receiving over the long connection", () => {
  it("learns the bot from bot info, connects, and hands a p2p text on, acknowledged", async () => {
    const { feishu, adapter, events } = await connected();
    expect(adapter.identity).toEqual({ openId: feishu.bot.openId, name: "CountBot" });
    expect(feishu.endpointCalls).toBe(1);
    const envelope = feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "hello bot" });
    const ack = await feishu.push(envelope);
    expect(ack.code).toBe(200);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      eventId: envelope.event.message.message_id,
      chatId: P2P,
      chatType: "private",
      senderId: alice.openId,
      scopes: ["alice01"],
      senderIsBot: false,
      text: "hello bot",
      mentionsBot: false,
      platformMessageId: envelope.event.message.message_id,
    });
  });

  it("matches mentions on the bot's own open_id only: not @all, not another user", async () => {
    const { feishu, events } = await connected();
    const botUser = { openId: feishu.bot.openId, name: "CountBot" };
    const lookalike = { openId: `${feishu.bot.openId}x`, name: "CountBot" };
    await feishu.push(feishu.event({ chatId: GROUP, chatType: "group", sender: alice, mentions: [botUser], text: "ping" }));
    await feishu.push(feishu.event({ chatId: GROUP, chatType: "group", sender: alice, mentions: ["all"], text: "everyone look" }));
    await feishu.push(feishu.event({ chatId: GROUP, chatType: "group", sender: alice, mentions: [bob], text: "for Bob" }));
    await feishu.push(feishu.event({ chatId: GROUP, chatType: "group", sender: alice, mentions: [lookalike], text: "impostor" }));
    expect(events.map((event) => [event.text, event.mentionsBot, event.chatType])).toEqual([
      ["@CountBot ping", true, "group"],
      ["@all everyone look", false, "group"],
      ["@Bob for Bob", false, "group"],
      ["@CountBot impostor", false, "group"],
    ]);
  });

  it("reads addressing from mentions[] only: the bot's name as text, a mention key typed by hand, an at element Feishu did not list, or code do not count", async () => {
    const { feishu, events } = await connected();
    const botUser = { openId: feishu.bot.openId, name: "CountBot" };
    const post = (content: Array<Array<Record<string, unknown>>>, mentions: Array<typeof botUser> = []) =>
      feishu.push(feishu.event({ chatId: GROUP, chatType: "group", sender: alice, type: "post", mentions, post: { title: "", content: content as never } }));
    await feishu.push(feishu.event({ chatId: GROUP, chatType: "group", sender: alice, mentions: [botUser], text: "real" }));
    await feishu.push(feishu.event({ chatId: GROUP, chatType: "group", sender: alice, text: "@CountBot by name" }));
    await feishu.push(feishu.event({ chatId: GROUP, chatType: "group", sender: alice, text: "@_user_1 typed key" }));
    await post([[{ tag: "at", mention: 0 }, { tag: "text", text: " listed" }]], [botUser]);
    await post([[{ tag: "at", user_id: feishu.bot.openId, user_name: "CountBot" }, { tag: "text", text: " unlisted" }]]);
    await post([[{ tag: "code_block", language: "TEXT", text: "@CountBot @_user_1" }]]);
    await post([[{ tag: "text", text: "`@CountBot` inline" }]]);
    expect(events.map((event) => event.mentionsBot)).toEqual([true, false, false, true, false, false, false]);
  });

  it("flattens a post with its mentions in place, links and code", async () => {
    const { feishu, events } = await connected();
    const botUser = { openId: feishu.bot.openId, name: "CountBot" };
    await feishu.push(
      feishu.event({
        chatId: GROUP,
        chatType: "group",
        sender: alice,
        type: "post",
        mentions: [bob, botUser],
        post: {
          title: "Plan",
          content: [
            [{ tag: "text", text: "ask " }, { tag: "at", mention: 0 }, { tag: "text", text: " and " }, { tag: "at", mention: 1 }],
            [{ tag: "a", text: "the doc", href: "https://example.com/doc" }],
            [{ tag: "code_block", language: "JS", text: "let x = 1;" }],
          ],
        },
      }),
    );
    expect(events[0]!.mentionsBot).toBe(true);
    expect(events[0]!.text).toBe("Plan\nask @Bob and @CountBot\n[the doc](https://example.com/doc)\n\n```js\nlet x = 1;\n```");
  });

  it("downloads an image through the resource API as an image part, and names a file", async () => {
    const { feishu, events } = await connected();
    const image = feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, type: "image", imageKey: "img_v3_key1" });
    feishu.addResource(image.event.message.message_id, "img_v3_key1", PNG, "image/png");
    await feishu.push(image);
    const file = feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, type: "file", fileKey: "file_v3_key2", fileName: "report.pdf" });
    feishu.addResource(file.event.message.message_id, "file_v3_key2", Buffer.from("%PDF-1.4"), "application/pdf");
    await feishu.push(file);
    expect(events[0]!.media).toHaveLength(1);
    expect(events[0]!.media[0]).toMatchObject({ kind: "image", mimeType: "image/png" });
    expect(await readFile(events[0]!.media[0]!.path)).toEqual(PNG);
    expect(events[1]!.text).toBe('[file "report.pdf"]');
    expect(events[1]!.media[0]).toMatchObject({ kind: "document", name: "report.pdf", mimeType: "application/pdf" });
    const call = feishu.requests.find((request) => request.route === "resource");
    expect(call?.query.type).toBe("image");
  });

  it("downloads a voice message as a file resource and passes it as audio with its duration in seconds", async () => {
    const { feishu, events } = await connected();
    const voice = feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, type: "audio", fileKey: "file_v3_voice", durationMs: 2_500 });
    const opus = Buffer.from("OggS opus voice");
    // The resource API answers voice with a generic type: the adapter still says audio.
    feishu.addResource(voice.event.message.message_id, "file_v3_voice", opus, "application/octet-stream");
    await feishu.push(voice);
    expect(events[0]!.text).toBe("");
    expect(events[0]!.media).toEqual([{ path: expect.stringMatching(/file_v3_voice\.opus$/), kind: "audio", mimeType: "audio/opus", durationSeconds: 2.5 }]);
    expect(await readFile(events[0]!.media[0]!.path)).toEqual(opus);
    expect(feishu.requests.find((request) => request.route === "resource")?.query.type).toBe("file");
  });

  it("keeps an image over the cap out, with a note", async () => {
    const { feishu, events } = await connected({ maxImageBytes: 4 });
    const image = feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, type: "image", imageKey: "img_big" });
    feishu.addResource(image.event.message.message_id, "img_big", PNG, "image/png");
    await feishu.push(image);
    expect(events[0]!.media).toEqual([]);
    expect(events[0]!.text).toMatch(/image not downloaded: over the .* limit/);
  });

  it("takes a redelivered event once, also under another event id, and drops messages too old to answer", async () => {
    const { feishu, events } = await connected();
    const envelope = feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "once" });
    await feishu.push(envelope);
    await feishu.push(envelope);
    await feishu.push({ ...envelope, header: { ...envelope.header, event_id: "another-event-id" } });
    await feishu.push(feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "from yesterday", createTime: Date.now() - 13 * 60 * 60 * 1000 }));
    expect(events.map((event) => event.text)).toEqual(["once"]);
  });

  it("gives a topic thread its own session with groupSessionScope: thread, and replies in it", async () => {
    const { feishu, adapter, events } = await connected({ groupSessionScope: "thread" });
    const botUser = { openId: feishu.bot.openId, name: "CountBot" };
    await feishu.push(feishu.event({ chatId: GROUP, chatType: "group", sender: alice, mentions: [botUser], text: "in a topic", rootId: "om_root1", threadId: "omt_1" }));
    expect(events[0]!.chatId).toBe(`${GROUP}:om_root1`);
    await adapter.send(events[0]!.chatId, "answer", { format: "plain" });
    expect(feishu.messages[0]).toMatchObject({ chatId: GROUP, replyTo: "om_root1", replyInThread: true });
  });

  it("acknowledges within the budget even when handing the event on is slow", async () => {
    const feishu = await startFeishu(cleanups);
    const context = await feishuAdapter(cleanups, feishu, { ackBudgetMs: 200 });
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    await context.adapter.start(async (event) => {
      await gate;
      return context.sink(event);
    });
    const started = Date.now();
    const ack = await feishu.push(feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "slow" }));
    expect(ack.code).toBe(200);
    expect(Date.now() - started).toBeLessThan(2_000);
    release();
    await feishu.waitFor(() => context.events.length === 1, { what: "the slow event" });
  });
});

describe("Feishu adapter: sending", () => {
  it("replies with a Markdown card carrying a uuid, and a repeated key shows once", async () => {
    const { feishu, adapter } = await connected();
    const envelope = feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "hi" });
    const replyTo = envelope.event.message.message_id;
    const first = await adapter.send(P2P, "**hello**", { format: "plain", replyTo, idempotencyKey: "out-1#0" });
    const again = await adapter.send(P2P, "**hello**", { format: "plain", replyTo, idempotencyKey: "out-1#0" });
    expect(again.platformMessageId).toBe(first.platformMessageId);
    expect(feishu.messages).toHaveLength(1);
    const [message] = feishu.messages;
    expect(message).toMatchObject({ msgType: "interactive", replyTo, chatId: P2P });
    expect(message!.uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(textOf(message!.content)).toBe("**hello**");
    await adapter.edit(P2P, first.platformMessageId, "**hello** again", { format: "plain" });
    expect(textOf(feishu.messages[0]!.content)).toBe("**hello** again");
  });

  it("creates a message in the chat when there is nothing to reply to", async () => {
    const { feishu, adapter } = await connected();
    await adapter.send(GROUP, "news", { format: "plain" });
    expect(feishu.messages[0]).toMatchObject({ chatId: GROUP, msgType: "interactive" });
    expect(feishu.messages[0]!.replyTo).toBeUndefined();
  });

  it("turns HTTP 400 {code}, HTTP 200 with code ≠ 0 and 429 into typed channel errors", async () => {
    const { feishu, adapter } = await connected();
    feishu.failNext("create", { status: 400, code: 230002, msg: "Bot is not in the chat." });
    await expect(adapter.send(GROUP, "x", { format: "plain" })).rejects.toMatchObject({ kind: "forbidden" });
    feishu.failNext("create", { status: 200, code: 230020, msg: "This operation triggers the frequency limit." });
    const returned = await adapter.send(GROUP, "x", { format: "plain" }).catch((error: unknown) => error);
    expect(returned).toBeInstanceOf(ChannelError);
    expect(returned).toMatchObject({ kind: "rate-limit", retryAfterMs: 1_000 });
    feishu.failNext("create", { status: 429, code: 99991400, msg: "request trigger frequency limit", resetSeconds: 3 });
    await expect(adapter.send(GROUP, "x", { format: "plain" })).rejects.toMatchObject({ kind: "rate-limit", retryAfterMs: 3_000 });
    feishu.failNext("patch", { status: 400, code: 230011, msg: "The message was withdrawn." });
    await expect(adapter.edit(GROUP, "om_gone", "x", { format: "plain" })).rejects.toMatchObject({ kind: "not-found" });
    expect(feishu.messages).toHaveLength(0);
  });

  it("splits a final that breaks the card limits over several cards, and falls back to a post when a card is refused", async () => {
    const { feishu, adapter } = await connected();
    const table = "| a | b |\n| --- | --- |\n| 1 | 2 |";
    const text = Array.from({ length: 7 }, (_, index) => `Table ${index}\n\n${table}`).join("\n\n");
    const outbound = { messageId: "m", kind: "final" as const, chunk: 0, chunks: 1, answers: [], metadata: {} };
    await adapter.send(GROUP, text, { format: "plain", idempotencyKey: "tables#0", outbound });
    expect(feishu.messages.length).toBeGreaterThanOrEqual(2);
    expect(feishu.messages.map((message) => textOf(message.content)).join("\n\n")).toBe(text);
    expect(new Set(feishu.messages.map((message) => message.uuid)).size).toBe(feishu.messages.length);

    feishu.failNext("create", { status: 400, code: 230099, msg: "Failed to create card content, ext=ErrCode: 11310" });
    await adapter.send(GROUP, "plain words", { format: "plain", idempotencyKey: "fallback#0", outbound });
    const last = feishu.messages.at(-1)!;
    expect(last.msgType).toBe("post");
    expect(textOf(last.content)).toBe("plain words");
  });
});

describe("Feishu adapter: the long connection stays alive", () => {
  it("reconnects a connection that went silent, counts it, and the next event is answered", async () => {
    const feishu = await startFeishu(cleanups, { pingIntervalSeconds: 1 });
    const context = await feishuAdapter(cleanups, feishu, { silenceTimeoutMs: 800 });
    await context.adapter.start(context.sink);
    feishu.silence();
    await feishu.waitFor(() => feishu.endpointCalls >= 2 && feishu.liveConnections >= 1, { timeoutMs: 8_000, what: "a new long connection" });
    expect(context.adapter.reconnects).toBeGreaterThanOrEqual(1);
    expect(context.logLines.some((line) => line.includes("silent; reconnecting"))).toBe(true);
    // The new connection is healthy: its pongs come a second apart, further than the 800 ms
    // configured, and it is kept (the limit counts for at least one and a half ping intervals).
    const reconnects = context.adapter.reconnects;
    const pongs = feishu.pongs;
    await feishu.waitFor(() => feishu.pongs >= pongs + 3, { timeoutMs: 8_000, what: "three more pongs" });
    expect(context.adapter.reconnects).toBe(reconnects);
    const ack = await feishu.push(feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "after the silence" }));
    expect(ack.code).toBe(200);
    expect(context.events.map((event) => event.text)).toEqual(["after the silence"]);
  });

  it("follows the SDK when the server closes the connection", async () => {
    const feishu = await startFeishu(cleanups, { reconnectIntervalSeconds: 0 });
    const context = await feishuAdapter(cleanups, feishu);
    await context.adapter.start(context.sink);
    feishu.dropConnections();
    await feishu.waitFor(() => feishu.endpointCalls >= 2 && feishu.liveConnections >= 1, { timeoutMs: 8_000, what: "the SDK's reconnect" });
    await feishu.push(feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "still here" }));
    expect(context.events.map((event) => event.text)).toEqual(["still here"]);
    expect(context.adapter.reconnects).toBeGreaterThanOrEqual(1);
  });

  it("refuses to start on an app id the SDK's WSClient would silently ignore", async () => {
    const feishu = await startFeishu(cleanups);
    const context = await feishuAdapter(cleanups, feishu, { appId: "not-a-cli-id" });
    await expect(context.adapter.start(context.sink)).rejects.toThrow(/cli_/);
  });
});
