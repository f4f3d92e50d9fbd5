/**
 * The dispatcher under a send governor: with many chats streaming at once into budgets too small
 * for their drafts, every platform call is paid for from the budgets first, drafts thin out, and
 * every final lands once, whole, in its chat's order; a 429 that still arrives closes the budget it
 * named and the chunk goes out once it opened again.
 */
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { OutboundMessage } from "../../../src/bus/message.js";
import { ChannelError } from "../../../src/errors.js";
import type { ChannelAdapter, ChannelCapabilities, EventSink, SendOptions } from "../../../src/gateway/channel.js";
import { createDispatcher } from "../../../src/gateway/dispatcher.js";
import { type QuotaStore, createMemoryQuotaStore } from "../../../src/gateway/quota-store.js";
import { defineQuotas } from "../../../src/gateway/quotas.js";
import { createSendGovernor } from "../../../src/gateway/send-governor.js";

const CHANNEL = "fake";

interface Call {
  method: "send" | "edit";
  chatId: string;
  text: string;
  at: number;
  final: boolean;
  /** A budget was taken for it, and no other call was made since. */
  paid?: boolean;
}

/** A platform that records each call with its time, and refuses the calls it is told to. */
class RecordingPlatform implements ChannelAdapter {
  readonly name = CHANNEL;
  readonly calls: Call[] = [];
  readonly messages = new Map<string, { chatId: string; text: string }>();
  refuse: ((call: Call) => ChannelError | undefined) | undefined;
  /** Budgets taken and not yet used by a call. */
  unpaid = 0;
  private nextId = 1;

  constructor(readonly capabilities: ChannelCapabilities) {}

  async start(_sink: EventSink): Promise<void> {}
  async stop(): Promise<void> {}
  async typing(): Promise<void> {}

  async send(chatId: string, text: string, options: SendOptions): Promise<{ platformMessageId: string }> {
    this.record({ method: "send", chatId, text, at: Date.now(), final: !options.idempotencyKey?.endsWith("#draft") });
    const platformMessageId = String(this.nextId++);
    this.messages.set(platformMessageId, { chatId, text });
    return { platformMessageId };
  }

  async edit(chatId: string, messageId: string, text: string): Promise<void> {
    this.record({ method: "edit", chatId, text, at: Date.now(), final: false });
    this.messages.set(messageId, { chatId, text });
  }

  private record(call: Call): void {
    call.paid = this.unpaid > 0;
    this.unpaid = Math.max(0, this.unpaid - 1);
    const refusal = this.refuse?.(call);
    if (refusal) throw refusal;
    this.calls.push(call);
  }
}


const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(limits: { account: number; windowMs: number }) {
  const bus = createMemoryBus({ redeliveryDelayMs: 1 });
  const platform = new RecordingPlatform({ maxMessageLength: 4096, streaming: "edit", draftIntervalMs: 5, minSendIntervalMs: 0 });
  const quotas = defineQuotas({ scopes: { bot: { per: "account", limit: limits.account, windowMs: limits.windowMs } } });
  const counted = { rateLimited: 0, draftSkipped: 0, deferred: 0, taken: 0 };
  const memory = createMemoryQuotaStore();
  // Tells the platform each budget taken, so it can tell a call that was paid for from one that was not.
  const store: QuotaStore = {
    ...memory,
    take: async (slots, cost, mode) => {
      const result = await memory.take(slots, cost, mode);
      if (result.taken) {
        counted.taken += cost;
        platform.unpaid += cost;
      }
      return result;
    },
  };
  const governor = createSendGovernor({ quotas, store, onDeferred: () => (counted.deferred += 1) });
  const metrics = { outbound: () => undefined, deliveryRetried: () => undefined, rateLimited: () => void (counted.rateLimited += 1), draftSkipped: () => void (counted.draftSkipped += 1) };
  const dispatcher = createDispatcher({ bus, adapter: platform, logger: pino({ level: "silent" }), governor, metrics });
  await dispatcher.start();
  cleanups.push(async () => {
    await dispatcher.stop();
    await bus.close();
  });
  return { bus, platform, governor, counted };
}

function final(chatId: string, id: string, content: string): OutboundMessage {
  return { id, channel: CHANNEL, chatId, content, kind: "final", media: [], metadata: {}, chatType: "group" };
}

describe("dispatcher under a send governor", () => {
  it("keeps 8 chats streaming at once within the bot's budget: drafts thin out, every final lands once, in order", async () => {
    const { bus, platform, counted } = await setup({ account: 6, windowMs: 200 });
    const chats = Array.from({ length: 8 }, (_, index) => `chat-${index}`);
    for (let step = 1; step <= 20; step++) {
      for (const chatId of chats) await bus.publishDraft({ replyId: `${chatId}-r1`, channel: CHANNEL, chatId, text: `word `.repeat(step * 5), chatType: "group" });
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    for (const chatId of chats) {
      await bus.publishOutbound(final(chatId, `${chatId}-r1`, `first answer of ${chatId}`));
      await bus.publishOutbound(final(chatId, `${chatId}-r2`, `second answer of ${chatId}`));
    }
    await vi.waitFor(() => expect(platform.calls.filter((call) => call.text.startsWith("second answer"))).toHaveLength(8), { timeout: 20_000 });
    // Every call was paid for, right before it was made; the store keeps the window (its own suite).
    expect(platform.calls.map((call) => call.paid)).toEqual(platform.calls.map(() => true));
    expect(counted.taken).toBe(platform.calls.length);
    expect(counted.draftSkipped).toBeGreaterThan(0);
    for (const chatId of chats) {
      const answers = platform.calls.filter((call) => call.chatId === chatId && call.text.includes("answer of"));
      // The first answer replaces the streamed draft (an edit) or comes as a message; each once, first before second.
      expect(answers.map((call) => call.text)).toEqual([`first answer of ${chatId}`, `second answer of ${chatId}`]);
      const shown = [...platform.messages.values()].filter((message) => message.chatId === chatId).map((message) => message.text);
      expect(shown).toEqual([`first answer of ${chatId}`, `second answer of ${chatId}`]);
    }
  });

  it("gives the bot's budget to the chat with replies queued behind first: a busy chat's finals are not each put behind every other chat's", async () => {
    const { bus, platform } = await setup({ account: 2, windowMs: 150 });
    for (let index = 1; index <= 4; index++) await bus.publishOutbound(final("busy", `busy-${index}`, `busy answer ${index}`));
    for (let index = 1; index <= 6; index++) await bus.publishOutbound(final(`single-${index}`, `single-${index}`, `single answer ${index}`));
    await vi.waitFor(() => expect(platform.calls).toHaveLength(10), { timeout: 10_000 });
    const order = platform.calls.map((call) => call.text);
    expect(order.filter((text) => text.startsWith("busy"))).toEqual(["busy answer 1", "busy answer 2", "busy answer 3", "busy answer 4"]);
    // First come first served would send the busy chat's last answer last of all, a window after the singles.
    expect(order.indexOf("busy answer 4")).toBeLessThan(order.indexOf("single answer 6"));
  });

  it("closes the budget a 429 named, for as long as the platform asked, and the chunk goes out once after", async () => {
    const { bus, platform, counted } = await setup({ account: 10, windowMs: 100 });
    let refusedAt: number | undefined;
    platform.refuse = (call) => {
      if (call.chatId !== "a" || refusedAt !== undefined) return undefined;
      refusedAt = Date.now();
      return new ChannelError("429", CHANNEL, { kind: "rate-limit", retryAfterMs: 300, scope: "bot" });
    };
    await bus.publishOutbound(final("a", "a-1", "to a"));
    await vi.waitFor(() => expect(counted.rateLimited).toBe(1));
    await bus.publishOutbound(final("b", "b-1", "to b"));
    await vi.waitFor(() => expect(platform.calls.map((call) => call.text).sort()).toEqual(["to a", "to b"]));
    // Nothing went out while the bot's budget was closed, to either chat (a timer may fire a millisecond early).
    expect(Math.min(...platform.calls.map((call) => call.at))).toBeGreaterThanOrEqual(refusedAt! + 295);
    expect(counted.deferred).toBeGreaterThanOrEqual(1);
  });
});
