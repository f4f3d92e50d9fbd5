/**
 * QQ replies against the fake platform: passive replies carry the user message's msg_id and a
 * rising msg_seq; a key sent before is not sent again; a msg_seq another gateway used is stepped
 * past; outside the window (too late, a sixth reply, QQ saying the msg_id expired) a message goes
 * out as an active one where allowed and is refused as `forbidden`, with the reason, otherwise;
 * Markdown only when enabled; no edits; an expired token bought anew.
 */
import { afterEach, describe, expect, it } from "vitest";
import { plainOf } from "../../../channels/qq/render-markdown.js";
import { ChannelError } from "../../../src/errors.js";
import type { FakeQQServer } from "../../support/fake-qq-server.js";
import { type Cleanup, alice, qqAdapter, recorder, startQQ } from "./qq-support.js";

const cleanups: Cleanup[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const chat = `user:${alice.openid}`;
const plain = { format: "plain" as const };

async function withMessage(qq: FakeQQServer, overrides: Parameters<typeof qqAdapter>[2] = {}) {
  const { adapter, logLines } = qqAdapter(cleanups, qq, overrides);
  const { events, sink } = recorder();
  await adapter.start(sink);
  const event = qq.c2c({ from: alice, text: "question" });
  qq.dispatch(event);
  await qq.waitFor(() => events.length === 1, { what: "the event" });
  return { adapter, logLines, msgId: event.d.id };
}

const refusal = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error as ChannelError);

describe("QQ replies", () => {
  it("replies passively with the msg_id and a rising msg_seq, and sends a key once", async () => {
    const qq = await startQQ(cleanups);
    const { adapter, msgId } = await withMessage(qq);
    const first = await adapter.send(chat, "part one", { ...plain, replyTo: msgId, idempotencyKey: "r1#0" });
    await adapter.send(chat, "part two", { ...plain, idempotencyKey: "r1#1" });
    const again = await adapter.send(chat, "part one", { ...plain, replyTo: msgId, idempotencyKey: "r1#0" });
    expect(again.platformMessageId).toBe(first.platformMessageId);
    expect(qq.messages.map((message) => [message.text, message.msgId, message.msgSeq])).toEqual([
      ["part one", msgId, 1],
      ["part two", msgId, 2],
    ]);
  });

  it("finds the msg_id of a reply's later part in the turn's answers, and steps past a msg_seq used elsewhere", async () => {
    const qq = await startQQ(cleanups);
    const { adapter: sender, msgId } = await withMessage(qq);
    // Another adapter (a standby after a failover) never saw the message.
    const { adapter: standby } = qqAdapter(cleanups, qq);
    await sender.send(chat, "from the first gateway", { ...plain, replyTo: msgId });
    const outbound = { messageId: "reply-1", kind: "final" as const, chunk: 1, chunks: 2, answers: [`qq-${msgId}`], metadata: {} };
    await standby.send(chat, "from the standby", { ...plain, outbound, idempotencyKey: "reply-1#1" });
    expect(qq.messages.map((message) => [message.text, message.msgId, message.msgSeq])).toEqual([
      ["from the first gateway", msgId, 1],
      ["from the standby", msgId, 2],
    ]);
    expect(qq.requests.filter((call) => call.code === 40054005)).toHaveLength(1);
  });

  it("refuses a sixth reply to one message, naming the window and the setting, when active messages are off", async () => {
    const qq = await startQQ(cleanups);
    const { adapter, msgId } = await withMessage(qq);
    for (let index = 1; index <= 5; index++) await adapter.send(chat, `reply ${index}`, { ...plain, replyTo: msgId });
    const error = await refusal(adapter.send(chat, "reply 6", { ...plain, replyTo: msgId }));
    expect(error).toBeInstanceOf(ChannelError);
    expect(error!.kind).toBe("forbidden");
    expect(error!.message).toMatch(/reply window.*channels\.qq\.activeMessages\.groups/);
    expect(qq.messages).toHaveLength(5);
  });

  it("sends outside the window as an active message where allowed: too late by our clock, or QQ saying the msg_id expired", async () => {
    const qq = await startQQ(cleanups, { activeGroupMessages: true, replyWindowMs: 60 });
    let clock = Date.now();
    const { adapter, msgId } = await withMessage(qq, { activeMessages: { groups: true, channels: true }, now: () => clock });
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Our clock says the window is open; QQ's says it is not: refused, then sent active.
    await adapter.send(chat, "QQ says too late", { ...plain, replyTo: msgId });
    clock += 10 * 60_000;
    await adapter.send(chat, "we know it is too late", { ...plain, replyTo: msgId });
    expect(qq.messages.map((message) => [message.text, message.msgId])).toEqual([
      ["QQ says too late", undefined],
      ["we know it is too late", undefined],
    ]);
    expect(qq.requests.filter((call) => call.code === 40034024)).toHaveLength(1);
  });

  it("sends Markdown only when enabled and the text is formatted, plain text otherwise, and never edits", async () => {
    const qq = await startQQ(cleanups, { markdown: true });
    const { adapter, msgId } = await withMessage(qq, { markdown: true });
    await adapter.send(chat, "**bold**", { format: "formatted", replyTo: msgId });
    await adapter.send(chat, "**as typed**", { ...plain, replyTo: msgId });
    expect(qq.messages.map((message) => [message.text, message.markdown])).toEqual([
      ["**bold**", true],
      ["**as typed**", false],
    ]);
    expect(adapter.render!("# Title\n**bold** and `code`")).toEqual({ text: "# Title\n**bold** and `code`", format: "formatted" });
    const error = await refusal(adapter.edit(chat, qq.messages[0]!.id, "changed", plain));
    expect(error!.kind).toBe("forbidden");
  });

  it("renders plain text without the Markdown marks", () => {
    expect(plainOf("# Title\nSome **bold**, _italic_ and `code`; a [link](https://example.com).\n- item\n```ts\nconst a = 1;\n```")).toBe(
      "Title\nSome bold, italic and code; a link (https://example.com).\n• item\nconst a = 1;",
    );
  });

  it("buys a new token when QQ refuses the one it has", async () => {
    const qq = await startQQ(cleanups);
    const { adapter, msgId } = await withMessage(qq);
    const bought = () => qq.requests.filter((call) => call.route === "token").length;
    const before = bought();
    qq.revokeTokens();
    await adapter.send(chat, "after the revocation", { ...plain, replyTo: msgId });
    expect(bought()).toBe(before + 1);
    expect(qq.messages.map((message) => message.text)).toEqual(["after the revocation"]);
  });
});
