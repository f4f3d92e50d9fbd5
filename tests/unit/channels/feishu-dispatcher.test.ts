/**
 * The Feishu adapter under the gateway's dispatcher (memory bus): a streamed reply updates one card
 * and ends on the final text; a 40 KB reply arrives whole over several cards; a rate limit is
 * waited out and the reply lands once; a redelivered final shows once (uuid).
 */
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { createDispatcher } from "../../../src/gateway/dispatcher.js";
import type { FakeFeishuServer } from "../../support/fake-feishu-server.js";
import { type Cleanup, feishuAdapter, startFeishu, textOf } from "./feishu-support.js";

const cleanups: Cleanup[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const GROUP = "oc_group00000000000000000000000001";
const alice = { openId: "ou_alice000000000000000000000000001", name: "Alice" };

async function running(feishu?: FakeFeishuServer) {
  const platform = feishu ?? (await startFeishu(cleanups));
  const context = await feishuAdapter(cleanups, platform);
  await context.adapter.start(context.sink);
  const bus: MessageBus = createMemoryBus();
  const dispatcher = createDispatcher({ bus, adapter: context.adapter, logger: pino({ level: process.env.DEBUG_FEISHU ? "debug" : "silent" }), annotateSends: true });
  await dispatcher.start();
  cleanups.push(() => dispatcher.stop());
  // A user message in the group to reply to.
  const question = platform.event({ chatId: GROUP, chatType: "group", sender: alice, text: "question" }).event.message.message_id;
  const final = (id: string, content: string) => bus.publishOutbound({ id, channel: "feishu", chatId: GROUP, content, replyTo: question, kind: "final", media: [], metadata: {} });
  return { feishu: platform, bus, question, final, ...context };
}

const longReply = () => {
  const paragraph = "This paragraph makes the reply long: forty kilobytes need several cards. ".repeat(10);
  const code = `\`\`\`ts\n${Array.from({ length: 60 }, (_, index) => `const line${index} = "${"x".repeat(20)}";`).join("\n")}\n\`\`\``;
  const parts: string[] = [];
  for (let index = 0; parts.join("\n\n").length < 40 * 1024; index++) parts.push(index % 4 === 3 ? code : `${index}. ${paragraph}`);
  return `${parts.join("\n\n")}\n\nThe end of the long reply.`;
};

describe("Feishu through the dispatcher", () => {
  it("streams a reply by updating one card and ends on the final text", async () => {
    const { feishu, bus, question, final } = await running();
    for (const text of ["Thinking", "Thinking about", "Thinking about it"]) {
      await bus.publishDraft({ replyId: "turn-1:0", channel: "feishu", chatId: GROUP, text, replyTo: question });
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    await final("turn-1:0", "**Done**: the answer is 42.");
    const card = await feishu.waitFor(() => feishu.messages.find((message) => textOf(message.content) === "**Done**: the answer is 42."), { what: "the final card" });
    expect(feishu.messages).toHaveLength(1);
    expect(card).toMatchObject({ msgType: "interactive", replyTo: question });
    expect(card.history.length).toBeGreaterThanOrEqual(2);
    expect(textOf(card.history[0]!)).toMatch(/^Thinking/);
  });

  it("delivers a 40 KB reply whole, in order, over several cards", async () => {
    const { feishu, final } = await running();
    const text = longReply();
    await final("turn-2:0", text);
    const ending = text.trimEnd().slice(-40);
    await feishu.waitFor(() => feishu.messages.some((message) => textOf(message.content).endsWith(ending)), { timeoutMs: 15_000, what: `the last card (${JSON.stringify(feishu.requests.map((call) => [call.route, call.status, call.code]))})` });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const texts = feishu.messages.map((message) => textOf(message.content));
    for (const [index, message] of feishu.messages.entries()) {
      expect(Buffer.byteLength(JSON.stringify(message.content))).toBeLessThanOrEqual(30 * 1024);
      expect(message.msgType, `card ${index}`).toBe("interactive");
    }
    // Every line of the reply arrives, in order (the splitter may close a code block and reopen it in the next card).
    const joined = texts.join("\n");
    let cursor = 0;
    for (const line of text.split("\n").map((item) => item.trim()).filter((item) => item.length > 0 && !item.startsWith("```"))) {
      const found = joined.indexOf(line, cursor);
      expect(found, `line "${line.slice(0, 40)}"`).toBeGreaterThanOrEqual(0);
      cursor = found + line.length;
    }
    expect(feishu.messages.length).toBeGreaterThanOrEqual(5);
    expect(feishu.messages[0]!.replyTo).toBeDefined();
    for (const part of texts) expect((part.match(/```/g) ?? []).length % 2).toBe(0);
  });

  it("waits out a rate limit and lands the reply once", async () => {
    const { feishu, final } = await running();
    feishu.failNext("reply", { status: 429, code: 99991400, msg: "request trigger frequency limit", resetSeconds: 1 });
    const started = Date.now();
    await final("turn-3:0", "after the limit");
    await feishu.waitFor(() => feishu.messages.length === 1, { timeoutMs: 10_000, what: "the reply" });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(feishu.messages.map((message) => textOf(message.content))).toEqual(["after the limit"]);
    expect(feishu.requests.filter((call) => call.route === "reply").map((call) => call.status)).toEqual([429, 200]);
  });

  it("shows a final once when another dispatcher sends it again (the uuid)", async () => {
    const first = await running();
    await first.final("turn-4:0", "only once");
    await first.feishu.waitFor(() => first.feishu.messages.length === 1, { what: "the reply" });
    // Another gateway's dispatcher (its own delivery memory) with the same reply: Feishu dedupes on the uuid.
    const second = await running(first.feishu);
    await second.bus.publishOutbound({ id: "turn-4:0", channel: "feishu", chatId: GROUP, content: "only once", replyTo: first.feishu.messages[0]!.replyTo, kind: "final", media: [], metadata: {} });
    await first.feishu.waitFor(() => first.feishu.requests.filter((call) => call.route === "reply").length === 2, { what: "the second send" });
    expect(first.feishu.messages).toHaveLength(1);
  });
});
