/**
 * The DingTalk adapter against the fake platform, through the real Stream SDK: the connection and
 * its acknowledgements, inbound parsing, replies through the OpenAPI, the error kinds.
 */
import { readFile } from "node:fs/promises";
import { afterEach, describe, expect, it } from "vitest";
import { ChannelError } from "../../../src/errors.js";
import type { PlatformEvent } from "../../../src/gateway/channel.js";
import { APP_SECRET, type Cleanup, alice, bob, dingtalkAdapter, guest, startDingTalk } from "./dingtalk-support.js";

const cleanups: Cleanup[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const PNG = Buffer.from("89504e470d0a1a0a0000000d4948445200000001000000010806000000", "hex");

async function connected(fakeOptions: Parameters<typeof startDingTalk>[1] = {}, overrides: Parameters<typeof dingtalkAdapter>[2] = {}) {
  const dingtalk = await startDingTalk(cleanups, fakeOptions);
  const context = await dingtalkAdapter(cleanups, dingtalk, overrides);
  await context.adapter.start(context.sink);
  return { dingtalk, ...context };
}

async function failure(promise: Promise<unknown>): Promise<ChannelError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ChannelError);
  return error as ChannelError;
}

describe("DingTalk adapter: receiving over the Stream connection", () => {
  it("opens the connection at the configured endpoint for the robot topic and hands a one-to-one text on, acknowledged", async () => {
    const { dingtalk, events } = await connected();
    expect(dingtalk.gatewayCalls).toBe(1);
    expect(dingtalk.subscriptions).toEqual([{ type: "CALLBACK", topic: "/v1.0/im/bot/messages/get" }]);
    const message = dingtalk.message({ sender: alice, text: "  hello bot " });
    expect(await dingtalk.push(message)).toEqual({ deliveries: 1 });
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      eventId: message.msgId,
      chatId: "user:alice01",
      chatType: "private",
      senderId: "alice01",
      senderName: "Alice",
      scopes: [alice.dingtalkId],
      senderIsBot: false,
      text: "hello bot",
      mentionsBot: false,
      platformMessageId: message.msgId,
    });
  });

  it("reads group mentions from isInAtList and atUsers only, and passes @Team text through", async () => {
    const { dingtalk, events } = await connected();
    const group = { conversationType: "2" as const, conversationId: "cidGroupA" };
    await dingtalk.push(dingtalk.message({ ...group, sender: alice, atRobot: true, text: " @Analysts review the shop" }));
    await dingtalk.push(dingtalk.message({ ...group, sender: alice, atUsers: [bob], text: "@Bob lunch?" }));
    const listedOnly = dingtalk.message({ ...group, sender: bob, text: "ping" });
    await dingtalk.push({ ...listedOnly, isInAtList: false, atUsers: [{ dingtalkId: dingtalk.chatbotUserId }] });
    await dingtalk.push(dingtalk.message({ ...group, sender: bob, text: "@CountBot typed, not picked" }));
    expect(events.map((event) => [event.chatId, event.chatType, event.text, event.mentionsBot])).toEqual([
      ["cidGroupA", "group", "@Analysts review the shop", true],
      ["cidGroupA", "group", "@Bob lunch?", false],
      ["cidGroupA", "group", "ping", true],
      ["cidGroupA", "group", "@CountBot typed, not picked", false],
    ]);
  });

  it("takes a message whose acknowledgement was lost once, however often DingTalk delivers it", async () => {
    const { dingtalk, events } = await connected({ redeliverAfterMs: 300 });
    const message = dingtalk.message({ sender: alice, text: "only once" });
    expect(await dingtalk.push(message, { ignoreAcks: 2 })).toEqual({ deliveries: 3 });
    expect(dingtalk.acks.get(message.msgId)).toBe(3);
    expect(events.map((event) => event.text)).toEqual(["only once"]);
  });

  it("leaves a message the sink could not take unacknowledged, and takes DingTalk's redelivery", async () => {
    const dingtalk = await startDingTalk(cleanups, { redeliverAfterMs: 300 });
    const context = await dingtalkAdapter(cleanups, dingtalk);
    let calls = 0;
    await context.adapter.start(async (event) => {
      calls += 1;
      if (calls === 1) throw new Error("bus unavailable");
      return context.sink(event);
    });
    const message = dingtalk.message({ sender: alice, text: "try again" });
    expect(await dingtalk.push(message)).toEqual({ deliveries: 2 });
    expect(calls).toBe(2);
    expect(context.events.map((event) => event.text)).toEqual(["try again"]);
  });

  it("hands each chat's messages on in order while other chats go ahead", async () => {
    const dingtalk = await startDingTalk(cleanups);
    const context = await dingtalkAdapter(cleanups, dingtalk);
    const seen: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    await context.adapter.start(async (event: PlatformEvent) => {
      if (event.text === "first") await held;
      seen.push(event.text);
      return "published";
    });
    const first = dingtalk.push(dingtalk.message({ sender: alice, text: "first" }));
    const second = dingtalk.push(dingtalk.message({ sender: alice, text: "second" }));
    await dingtalk.push(dingtalk.message({ sender: bob, text: "other chat" }));
    expect(seen).toEqual(["other chat"]);
    release();
    await Promise.all([first, second]);
    expect(seen).toEqual(["other chat", "first", "second"]);
  });

  it("answers DingTalk's ping, reconnects after a disconnect notice and a dropped socket (backing off while refused), and takes what comes next", { timeout: 30_000 }, async () => {
    const { dingtalk, adapter, events } = await connected();
    const changes: boolean[] = [];
    adapter.watchConnection?.((change) => changes.push(change.connected));
    await dingtalk.ping();
    dingtalk.disconnect(5_000);
    await dingtalk.waitFor(() => dingtalk.gatewayCalls >= 2 && dingtalk.liveConnections === 1, { what: "a new connection after the notice" });
    // Refused twice more (the endpoint, then the socket): one chain of attempts backs off and opens one connection.
    dingtalk.failNext("gateway", { status: 503, code: "ServiceUnavailable" });
    dingtalk.refuseUpgrades(1);
    dingtalk.dropConnections();
    const gatewayCalls = () => dingtalk.requests.filter((call) => call.route === "gateway");
    await dingtalk.waitFor(() => dingtalk.liveConnections === 1 && gatewayCalls().length === 5, { timeoutMs: 15_000, what: "a new connection after the drop" });
    await dingtalk.push(dingtalk.message({ sender: alice, text: "still here" }));
    expect(events.map((event) => event.text)).toEqual(["still here"]);
    expect(adapter.reconnects).toBe(2);
    expect(dingtalk.liveConnections).toBe(1);
    expect(gatewayCalls().map((call) => call.status)).toEqual([200, 200, 503, 200, 200]);
    // The runtime heard each drop once and each return once, not every failed attempt.
    expect(changes).toEqual([false, true, false, true]);
  });

  it("downloads pictures and files under their caps and notes the rest", async () => {
    const { dingtalk, events } = await connected({}, { maxFileBytes: 100 });
    dingtalk.addFile("pic-code", PNG, "image/png");
    dingtalk.addFile("doc-code", Buffer.from("report body"), "application/pdf");
    dingtalk.addFile("big-code", Buffer.alloc(500, 1), "application/zip");
    await dingtalk.push(dingtalk.message({ sender: alice, msgtype: "picture", content: { downloadCode: "pic-code" } }));
    await dingtalk.push(dingtalk.message({ sender: alice, msgtype: "file", content: { downloadCode: "doc-code", fileName: "report.pdf" } }));
    await dingtalk.push(dingtalk.message({ sender: alice, msgtype: "file", content: { downloadCode: "big-code", fileName: "big.zip" } }));
    await dingtalk.push(dingtalk.message({ sender: alice, msgtype: "richText", content: { richText: [{ text: "look " }, { type: "picture", downloadCode: "missing" }, { text: "here" }] } }));
    await dingtalk.push(dingtalk.message({ sender: alice, msgtype: "audio", content: { downloadCode: "voice", recognition: "call me back" } }));
    const [picture, file, big, rich, voice] = events;
    expect(picture!.media).toEqual([expect.objectContaining({ kind: "image", mimeType: "image/png" })]);
    expect(await readFile(picture!.media[0]!.path)).toEqual(PNG);
    expect(file).toMatchObject({ text: '[file "report.pdf"]', media: [{ kind: "document", mimeType: "application/pdf", name: "report.pdf" }] });
    expect(big).toMatchObject({ text: '[file "big.zip"]\n\n[file "big.zip" not downloaded: over the 100 B limit]', media: [] });
    expect(rich).toMatchObject({ text: "look here\n\n[image could not be downloaded]", media: [] });
    expect(voice!.text).toBe("[voice message] call me back");
  });

  it("refuses to start with credentials DingTalk refuses, saying so without the secret", async () => {
    const dingtalk = await startDingTalk(cleanups);
    const context = await dingtalkAdapter(cleanups, dingtalk, { appSecret: `${APP_SECRET}-wrong` });
    const error = await failure(context.adapter.start(context.sink));
    expect(error.message).toMatch(/accessToken failed: 400 invalidClientIdOrSecret/);
    expect(`${error.message} ${String(error.cause)}`).not.toContain(APP_SECRET);
  });
});

describe("DingTalk adapter: replies", () => {
  it("sends Markdown to a user and a group through the OpenAPI, plain text as sampleText, and returns the processQueryKey", async () => {
    const { dingtalk, adapter } = await connected();
    const direct = await adapter.send("user:alice01", "**Hello** there", { format: "formatted" });
    const group = await adapter.send("cidGroupA", "# Result\nall good", { format: "formatted" });
    await adapter.send("cidGroupA", "raw *text*", { format: "plain" });
    expect(direct.platformMessageId).toBe(dingtalk.messages[0]!.processQueryKey);
    expect(group.platformMessageId).toBe(dingtalk.messages[1]!.processQueryKey);
    expect(dingtalk.messages.map((message) => [message.route, message.target, message.msgKey, message.title, message.text])).toEqual([
      ["user", "alice01", "sampleMarkdown", "Hello there", "**Hello** there"],
      ["group", "cidGroupA", "sampleMarkdown", "Result", "# Result\nall good"],
      ["group", "cidGroupA", "sampleText", undefined, "raw *text*"],
    ]);
  });

  it("answers a sender outside the organization through the message's session webhook", async () => {
    const { dingtalk, adapter, events } = await connected();
    await dingtalk.push(dingtalk.message({ sender: guest, text: "hi from outside" }));
    const chatId = events[0]!.chatId;
    expect(chatId).toMatch(/^dm:cidp2p/);
    expect((await adapter.send(chatId, "welcome", { format: "formatted", idempotencyKey: "k#0" })).platformMessageId).toMatch(/^session:/);
    expect(dingtalk.messages.at(-1)).toMatchObject({ route: "session", msgKey: "markdown", text: "welcome" });
    expect((await failure(adapter.send("dm:cidUnknown", "lost", { format: "formatted" }))).kind).toBe("not-found");
    expect((await failure(adapter.send(chatId, "draft", { format: "formatted", idempotencyKey: "r#draft" }))).kind).toBe("other");
  });

  it("streams a draft into an AI card updated in place and finishes it with the final text", async () => {
    const { dingtalk, adapter } = await connected();
    const { platformMessageId } = await adapter.send("cidGroupA", "Thinking", { format: "formatted", idempotencyKey: "reply-1#draft" });
    expect(platformMessageId).toMatch(/^card:countbot-[0-9a-f]{32}$/);
    await adapter.edit("cidGroupA", platformMessageId, "Thinking about it", { format: "formatted" });
    const outbound = { messageId: "reply-1", kind: "final" as const, chunk: 0, chunks: 1, answers: [], metadata: {} };
    await adapter.edit("cidGroupA", platformMessageId, "The answer.", { format: "formatted", outbound });
    const [card] = dingtalk.cards;
    expect(card).toMatchObject({ openSpaceId: "dtv1.card//IM_GROUP.cidGroupA", templateId: "tpl.schema", streamed: 1, statuses: ["2", "3"] });
    expect(card!.params.msgContent).toBe("The answer.");
    // The same draft key names the same card: a retried open makes no second one.
    await adapter.send("cidGroupA", "Thinking", { format: "formatted", idempotencyKey: "reply-1#draft" });
    expect(dingtalk.cards).toHaveLength(1);
    await adapter.send("user:alice01", "Hi", { format: "formatted", idempotencyKey: "reply-2#draft" });
    expect(dingtalk.cards[1]!.openSpaceId).toBe("dtv1.card//IM_ROBOT.alice01");
    expect((await failure(adapter.edit("cidGroupA", "pqk000001", "no", { format: "formatted" }))).kind).toBe("not-found");
  });

  it("finishes a card whose final update never came once it settled, and sets it inputting again when it is updated after", async () => {
    const { dingtalk, adapter } = await connected({}, { aiCard: { enabled: true, templateId: "tpl.schema", contentKey: "msgContent", settleMs: 200 } });
    const { platformMessageId } = await adapter.send("cidGroupA", "Whole answer", { format: "formatted", idempotencyKey: "reply-3#draft" });
    const card = dingtalk.cards[0]!;
    await dingtalk.waitFor(() => card.statuses.at(-1) === "3", { what: "the settled card" });
    expect(card.params.msgContent).toBe("Whole answer");
    await adapter.edit("cidGroupA", platformMessageId, "Whole answer, and more", { format: "formatted" });
    expect(card.statuses).toEqual(["2", "3", "2"]);
    expect(card.params.msgContent).toBe("Whole answer, and more");
  });

  it("maps DingTalk's refusals to ChannelError kinds, refreshes a refused token once, and never shows a credential", async () => {
    const { dingtalk, adapter } = await connected();
    const send = () => adapter.send("cidGroupA", "x", { format: "formatted" });
    dingtalk.failNext("groupSend", { status: 403, code: "Forbidden.AccessDenied.QpsLimitForApi", message: "请求过于频繁" });
    const limited = await failure(send());
    expect([limited.kind, limited.retryAfterMs]).toEqual(["rate-limit", 1_000]);
    dingtalk.failNext("groupSend", { status: 403, code: "Forbidden.AccessDenied.RobotNotInGroup", message: "robot not in group" });
    expect((await failure(send())).kind).toBe("forbidden");
    dingtalk.failNext("groupSend", { status: 404, code: "resource.not.found", message: "conversation gone" });
    expect((await failure(send())).kind).toBe("not-found");
    dingtalk.failNext("groupSend", { status: 500, code: "ServiceUnavailable" });
    expect((await failure(send())).kind).toBe("network");
    expect((await failure(adapter.send("cidGroupA", "x".repeat(6_000), { format: "formatted" }))).kind).toBe("too-long");
    const tokenCalls = () => dingtalk.requests.filter((call) => call.route === "token").length;
    const before = tokenCalls();
    dingtalk.revokeTokens();
    await send();
    expect(tokenCalls()).toBe(before + 1);
    dingtalk.failNext("token", { status: 400, code: "invalidClientIdOrSecret", message: `secret ${APP_SECRET} refused` });
    dingtalk.revokeTokens();
    const refused = await failure(send());
    expect(refused.message).not.toContain(APP_SECRET);
    expect(String(refused.cause)).not.toContain(APP_SECRET);
  });

  it("stops only once the messages it was taking reached the sink", async () => {
    const dingtalk = await startDingTalk(cleanups);
    const context = await dingtalkAdapter(cleanups, dingtalk);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inSink = new Promise<void>((resolve) => (entered = resolve));
    const taken: string[] = [];
    await context.adapter.start(async (event) => {
      entered();
      await held;
      taken.push(event.text);
      return "published";
    });
    // Its acknowledgement cannot go out on the closed socket: DingTalk would deliver it again, and the bus dedupes it.
    const pushed = dingtalk.push(dingtalk.message({ sender: alice, text: "in flight" }), { timeoutMs: 1_000 }).catch(() => undefined);
    await inSink;
    const stopped = context.adapter.stop();
    setTimeout(release, 50);
    await stopped;
    expect(taken).toEqual(["in flight"]);
    await pushed;
  });
});
