import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { OutboundMessage } from "../../../src/bus/message.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { ChannelError, type ChannelErrorKind } from "../../../src/errors.js";
import { type DispatcherOptions, createDispatcher } from "../../../src/gateway/dispatcher.js";
import { draftIdOf } from "../../../src/gateway/kit/index.js";
import type { ChannelAdapter, ChannelCapabilities, EventSink, RenderedText, SendOptions } from "../../../src/gateway/channel.js";
import { renderTelegramHtml, telegramRenderedLength } from "../../../channels/telegram/render-html.js";

const CHANNEL = "fake";

type Call =
  | { method: "send"; chatId: string; text: string; options: SendOptions }
  | { method: "edit"; chatId: string; messageId: string; text: string; options: SendOptions }
  | { method: "draft"; chatId: string; draftId: number; text: string };

/** A chat platform in memory: records every call, keeps the messages, fails on demand. */
class FakePlatform implements ChannelAdapter {
  readonly name = CHANNEL;
  readonly calls: Call[] = [];
  /** What each chat shows now, by platform message id. */
  readonly messages = new Map<string, { chatId: string; text: string; format: SendOptions["format"] }>();
  private readonly failures: Array<{ when: (call: Call) => boolean; error: () => Error; times: number }> = [];
  private nextId = 100;
  draft?: (chatId: string, draftId: number, text: string) => Promise<void>;
  /** Renders as Telegram does: the dispatcher takes a platform's renderer, whatever it is. */
  readonly render = (markdown: string): RenderedText => ({ text: renderTelegramHtml(markdown), format: "formatted" });
  readonly measure = telegramRenderedLength;

  constructor(readonly capabilities: ChannelCapabilities) {
    if (capabilities.streaming === "draft") {
      this.draft = async (chatId, draftId, text) => this.record({ method: "draft", chatId, draftId, text });
    }
  }

  /** The next `times` calls matching `when` throw a ChannelError of `kind`. */
  failNext(when: (call: Call) => boolean, kind: ChannelErrorKind, times = 1, retryAfterMs?: number): void {
    this.failures.push({ when, error: () => new ChannelError(`injected ${kind}`, CHANNEL, { kind, retryAfterMs }), times });
  }

  /** Streamed messages the dispatcher said show their final now (finishStream). */
  readonly finished: Array<{ chatId: string; messageId: string; text: string }> = [];

  async finishStream(chatId: string, messageId: string, text: string): Promise<void> {
    this.finished.push({ chatId, messageId, text });
  }

  async start(_sink: EventSink): Promise<void> {}
  async stop(): Promise<void> {}
  async typing(): Promise<void> {}

  async send(chatId: string, text: string, options: SendOptions): Promise<{ platformMessageId: string }> {
    this.record({ method: "send", chatId, text, options });
    const platformMessageId = String(this.nextId++);
    this.messages.set(platformMessageId, { chatId, text, format: options.format });
    return { platformMessageId };
  }

  async edit(chatId: string, messageId: string, text: string, options: SendOptions): Promise<void> {
    this.record({ method: "edit", chatId, messageId, text, options });
    if (!this.messages.has(messageId)) throw new ChannelError("message to edit not found", CHANNEL, { kind: "not-found" });
    this.messages.set(messageId, { chatId, text, format: options.format });
  }

  /** The texts a chat shows, oldest message first. */
  shown(chatId: string): string[] {
    return [...this.messages.values()].filter((message) => message.chatId === chatId).map((message) => message.text);
  }

  sends(chatId?: string): Array<Call & { method: "send" }> {
    return this.calls.filter((call): call is Call & { method: "send" } => call.method === "send" && (chatId === undefined || call.chatId === chatId));
  }

  private record(call: Call): void {
    this.calls.push(call);
    const failure = this.failures.find((entry) => entry.times > 0 && entry.when(call));
    if (failure) {
      failure.times -= 1;
      (call as { failed?: boolean }).failed = true;
      throw failure.error();
    }
  }
}

const telegramLike: ChannelCapabilities = {
  maxMessageLength: 4096,
  streaming: "none",
  draftIntervalMs: 1_000,
  minSendIntervalMs: 1_000,
};

/** A fake clock whose sleeps pass at once (recorded), or wait for the test when `gated`. */
function fakeTime() {
  let clock = 1_000_000;
  const slept: number[] = [];
  const gates: Array<{ ms: number; open: () => void }> = [];
  let gated = false;
  return {
    slept,
    gates,
    now: () => clock,
    sleep: (ms: number) => {
      slept.push(ms);
      if (!gated) {
        clock += ms;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => gates.push({ ms, open: () => ((clock += ms), resolve()) }));
    },
    gate: (on: boolean) => void (gated = on),
    openAll: () => {
      for (const gate of gates.splice(0)) gate.open();
    },
  };
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(capabilities: Partial<ChannelCapabilities> = {}, options: Partial<DispatcherOptions> = {}) {
  const bus: MessageBus = createMemoryBus({ redeliveryDelayMs: 1 });
  const platform = new FakePlatform({ ...telegramLike, ...capabilities });
  const time = fakeTime();
  const dispatcher = createDispatcher({ bus, adapter: platform, logger: pino({ level: "silent" }), now: time.now, sleep: time.sleep, ...options });
  await dispatcher.start();
  cleanups.push(async () => {
    time.gate(false);
    time.openAll();
    await dispatcher.stop();
    await bus.close();
  });
  return { bus, platform, time, dispatcher };
}

let sequence = 0;
function reply(chatId: string, content: string, extra: Partial<OutboundMessage> = {}): OutboundMessage {
  return { id: `in-${++sequence}:0`, channel: CHANNEL, chatId, content, kind: "final", media: [], metadata: {}, ...extra };
}

/** Every code block opened in a message is closed in it. */
function expectBalancedCode(text: string): void {
  expect(text.split("<pre>").length).toBe(text.split("</pre>").length);
}

function longReply(): { content: string; code: string } {
  const paragraph = (index: number) => `Paragraph ${index}: ${"the answer explains one more detail of the change. ".repeat(6).trim()}`;
  const code = ["```ts", ...Array.from({ length: 30 }, (_, line) => `const value${line} = items.filter((item) => item.size < ${line} && item.ok);`), "```"].join("\n");
  const content = [...Array.from({ length: 8 }, (_, index) => paragraph(index)), code, ...Array.from({ length: 3 }, (_, index) => paragraph(8 + index))].join("\n\n");
  return { content, code };
}

describe("outbound dispatcher", () => {
  it("delivers a 5,000-character reply as two messages, in order, code block intact, threaded", async () => {
    const { bus, platform } = await setup();
    const { content, code } = longReply();
    expect(content.length).toBeGreaterThan(5_000);
    await bus.publishOutbound(reply("42", content, { replyTo: "7" }));
    await vi.waitFor(() => expect(platform.sends()).toHaveLength(2));
    const [first, second] = platform.sends();
    expect(first!.options).toEqual({ replyTo: "7", format: "formatted", idempotencyKey: expect.stringMatching(/#0$/) });
    expect(second!.options.replyTo).toBeUndefined();
    for (const call of [first!, second!]) {
      expect(call.text.length).toBeLessThanOrEqual(4096);
      expectBalancedCode(call.text);
    }
    expect(first!.text.startsWith("Paragraph 0:")).toBe(true);
    expect(second!.text).toContain("Paragraph 10:");
    // The whole code block is in one message, every line of it.
    const holder = [first!, second!].filter((call) => call.text.includes('<pre><code class="language-ts">'));
    expect(holder).toHaveLength(1);
    for (const line of code.split("\n").slice(1, -1)) expect(holder[0]!.text).toContain(line.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"));
  });

  it("sends a chunk as plain text when the platform rejects its formatting", async () => {
    const { bus, platform } = await setup();
    platform.failNext((call) => call.method === "send" && call.options.format === "formatted", "formatting");
    await bus.publishOutbound(reply("42", "Hello **world** <3", { replyTo: "9" }));
    await vi.waitFor(() => expect(platform.messages.size).toBe(1));
    expect(platform.calls.map((call) => call.method === "send" && [call.text, call.options.format])).toEqual([
      ["Hello <b>world</b> &lt;3", "formatted"],
      ["Hello **world** <3", "plain"],
    ]);
    expect(platform.sends()[1]!.options.replyTo).toBe("9");
  });

  it("waits out a 429 for its retry_after and loses or doubles nothing", async () => {
    const { bus, platform, time } = await setup();
    const { content } = longReply();
    let sends = 0;
    platform.failNext((call) => call.method === "send" && ++sends === 2, "rate-limit", 1, 7_000);
    await bus.publishOutbound(reply("42", content));
    await vi.waitFor(() => expect(platform.messages.size).toBe(2));
    expect(time.slept).toContain(7_000);
    expect(platform.sends()).toHaveLength(3); // the second chunk twice: refused, then accepted
    const [first, refused, retried] = platform.sends();
    expect(retried!.text).toBe(refused!.text);
    expect(platform.shown("42")).toEqual([first!.text, retried!.text]);
  });

  it("sends a final published twice once (delivery dedupe)", async () => {
    const { bus, platform } = await setup();
    const message = reply("42", "only once");
    await bus.publishOutbound(message);
    await bus.publishOutbound(message);
    await bus.publishOutbound(reply("42", "after"));
    await vi.waitFor(() => expect(platform.shown("42")).toContain("after"));
    expect(platform.shown("42")).toEqual(["only once", "after"]);
  });

  it("hands a message back to the bus after network failures and sends only the chunks still missing", async () => {
    const { bus, platform, time } = await setup({ minSendIntervalMs: 0 }, { maxRetries: 2 });
    const { content } = longReply();
    let sends = 0;
    // The second chunk fails 3 times in a row: more than maxRetries, so the bus redelivers.
    platform.failNext((call) => call.method === "send" && ++sends >= 2, "network", 3);
    await bus.publishOutbound(reply("42", content));
    await vi.waitFor(() => expect(platform.messages.size).toBe(2));
    const texts = platform.sends().map((call) => call.text);
    expect(texts).toHaveLength(5);
    expect(new Set(texts.slice(1)).size).toBe(1); // only the second chunk was tried again
    expect(platform.shown("42")).toEqual([texts[0], texts[4]]);
    expect(time.slept).toEqual([500, 1_000]); // two backoffs, then the bus took it back
  });

  it("drops a message for a chat that is gone and goes on with the others", async () => {
    const { bus, platform } = await setup();
    platform.failNext((call) => call.chatId === "13", "forbidden");
    await bus.publishOutbound(reply("13", "to a blocked chat"));
    await bus.publishOutbound(reply("42", "to a live chat"));
    await vi.waitFor(() => expect(platform.shown("42")).toEqual(["to a live chat"]));
    expect(platform.sends("13")).toHaveLength(1);
  });

  it("does not send notices unless asked to", async () => {
    const quiet = await setup();
    await quiet.bus.publishOutbound(reply("42", "🔧 exec ls", { kind: "notice" }));
    await quiet.bus.publishOutbound(reply("42", "done"));
    await vi.waitFor(() => expect(quiet.platform.shown("42")).toEqual(["done"]));

    const chatty = await setup({}, { showNotices: true });
    await chatty.bus.publishOutbound(reply("42", "🔧 exec ls", { kind: "notice" }));
    await vi.waitFor(() => expect(chatty.platform.shown("42")).toEqual(["🔧 exec ls"]));
  });

  it("edit streaming: the first draft is sent, later ones edit it, the final edits it into the real reply", async () => {
    const { bus, platform } = await setup({ streaming: "edit" });
    const replyId = "in-edit:0";
    await bus.publishDraft({ replyId, channel: CHANNEL, chatId: "42", text: "Hel", replyTo: "5" });
    await vi.waitFor(() => expect(platform.sends()).toHaveLength(1));
    await bus.publishDraft({ replyId, channel: CHANNEL, chatId: "42", text: "Hello wor", replyTo: "5" });
    await vi.waitFor(() => expect(platform.calls).toHaveLength(2));
    await bus.publishOutbound(reply("42", "Hello **world**", { id: replyId, replyTo: "5" }));
    await vi.waitFor(() => expect(platform.shown("42")).toEqual(["Hello <b>world</b>"]));
    expect(platform.calls.map((call) => [call.method, call.text])).toEqual([
      ["send", "Hel"],
      ["edit", "Hello wor"],
      ["edit", "Hello <b>world</b>"],
    ]);
    expect(platform.sends()[0]!.options.replyTo).toBe("5");
    const edited = platform.calls.find((call) => call.method === "edit");
    expect(platform.finished).toEqual([{ chatId: "42", messageId: edited?.method === "edit" ? edited.messageId : "", text: "Hello <b>world</b>" }]);
  });

  it("edit streaming: a final the last draft already shows is not sent again, and the platform hears the stream is finished", async () => {
    const { bus, platform } = await setup({ streaming: "edit" });
    const replyId = "in-same:0";
    await bus.publishDraft({ replyId, channel: CHANNEL, chatId: "42", text: "All done." });
    await vi.waitFor(() => expect(platform.sends()).toHaveLength(1));
    await bus.publishOutbound(reply("42", "All done.", { id: replyId }));
    await vi.waitFor(() => expect(platform.finished).toHaveLength(1));
    expect(platform.calls.map((call) => call.method)).toEqual(["send"]);
    expect(platform.finished[0]).toMatchObject({ chatId: "42", text: "All done." });
  });

  it("edit streaming: edits at most once per interval, always with the newest text; a long final goes on in new messages", async () => {
    const { bus, platform, time } = await setup({ streaming: "edit", maxMessageLength: 60 });
    const replyId = "in-throttle:0";
    const draft = (text: string) => bus.publishDraft({ replyId, channel: CHANNEL, chatId: "42", text });
    await draft("one");
    await vi.waitFor(() => expect(platform.calls).toHaveLength(1));
    time.gate(true);
    await draft("one two");
    await vi.waitFor(() => expect(time.gates).toHaveLength(1)); // throttled: waiting for the interval
    await draft("one two three");
    await draft("one two three four");
    time.gate(false);
    time.openAll();
    await vi.waitFor(() => expect(platform.calls).toHaveLength(2));
    expect(platform.calls[1]).toMatchObject({ method: "edit", text: "one two three four" });

    await draft("word ".repeat(30)); // longer than a message: its first part and "…"
    await vi.waitFor(() => expect(platform.calls).toHaveLength(3));
    expect(platform.calls[2]!.text.endsWith("\n…")).toBe(true);
    expect(platform.calls[2]!.text.length).toBeLessThanOrEqual(60);

    const final = "final ".repeat(15).trim();
    await bus.publishOutbound(reply("42", final, { id: replyId }));
    await vi.waitFor(() => expect(platform.messages.size).toBe(2));
    const shown = platform.shown("42");
    expect(shown.join(" ")).toBe(final);
    expect(platform.sends()).toHaveLength(2); // the draft message, then the final's second chunk
  });

  it("edit streaming: when the draft message is gone, the final lands as a new message", async () => {
    const { bus, platform } = await setup({ streaming: "edit" });
    const replyId = "in-deleted:0";
    await bus.publishDraft({ replyId, channel: CHANNEL, chatId: "42", text: "partial" });
    await vi.waitFor(() => expect(platform.messages.size).toBe(1));
    platform.messages.clear(); // the user deleted it
    await bus.publishOutbound(reply("42", "complete answer", { id: replyId }));
    await vi.waitFor(() => expect(platform.shown("42")).toEqual(["complete answer"]));
    expect(platform.calls.map((call) => call.method)).toEqual(["send", "edit", "send"]);
  });

  it("edit streaming across a failover: the gateway taking over edits the draft message another gateway sent", async () => {
    const { bus, platform, dispatcher } = await setup({ streaming: "edit" });
    const replyId = "in-failover:0";
    await bus.publishDraft({ replyId, channel: CHANNEL, chatId: "42", text: "The first half", replyTo: "5" });
    await vi.waitFor(() => expect(platform.shown("42")).toEqual(["The first half"]));
    await dispatcher.stop(); // the first gateway is gone; its in-memory draft state with it
    const time = fakeTime();
    const successor = createDispatcher({ bus, adapter: platform, logger: pino({ level: "silent" }), now: time.now, sleep: time.sleep });
    await successor.start();
    cleanups.push(() => successor.stop());
    await bus.publishDraft({ replyId, channel: CHANNEL, chatId: "42", text: "The first half and", replyTo: "5" });
    await vi.waitFor(() => expect(platform.shown("42")).toEqual(["The first half and"]));
    await bus.publishOutbound(reply("42", "The first half and the second.", { id: replyId, replyTo: "5" }));
    await vi.waitFor(() => expect(platform.shown("42")).toEqual(["The first half and the second."]));
    expect(platform.sends()).toHaveLength(1);
  });

  it("edit streaming across a failover: a final with no draft state here edits the recorded draft message", async () => {
    const { bus, platform, dispatcher } = await setup({ streaming: "edit" });
    const replyId = "in-failover-final:0";
    await bus.publishDraft({ replyId, channel: CHANNEL, chatId: "42", text: "Almost all of it" });
    await vi.waitFor(() => expect(platform.shown("42")).toEqual(["Almost all of it"]));
    await dispatcher.stop();
    const time = fakeTime();
    const successor = createDispatcher({ bus, adapter: platform, logger: pino({ level: "silent" }), now: time.now, sleep: time.sleep });
    await successor.start();
    cleanups.push(() => successor.stop());
    await bus.publishOutbound(reply("42", "Almost all of it, and the end.", { id: replyId }));
    await vi.waitFor(() => expect(platform.shown("42")).toEqual(["Almost all of it, and the end."]));
    expect(platform.sends()).toHaveLength(1);
    expect(platform.calls.at(-1)).toMatchObject({ method: "edit", text: "Almost all of it, and the end." });
  });

  it("draft streaming in a private chat uses adapter.draft, then sends the final as a real message", async () => {
    const { bus, platform } = await setup({ streaming: "draft" });
    const replyId = "in-draft:0";
    await bus.publishDraft({ replyId, channel: CHANNEL, chatId: "42", text: "Thinking", chatType: "private" });
    await vi.waitFor(() => expect(platform.calls).toHaveLength(1));
    await bus.publishDraft({ replyId, channel: CHANNEL, chatId: "42", text: "Thinking about it", chatType: "private" });
    await vi.waitFor(() => expect(platform.calls).toHaveLength(2));
    await bus.publishOutbound(reply("42", "The **answer**", { id: replyId, replyTo: "3" }));
    await vi.waitFor(() => expect(platform.messages.size).toBe(1));
    expect(platform.calls.map((call) => call.method)).toEqual(["draft", "draft", "send"]);
    const [first, second] = platform.calls as Array<Call & { method: "draft" }>;
    expect(first!.draftId).toBe(draftIdOf(replyId));
    expect(second!.draftId).toBe(first!.draftId);
    expect(Number.isInteger(first!.draftId) && first!.draftId > 0).toBe(true);
    expect(platform.sends()[0]).toMatchObject({ text: "The <b>answer</b>", options: { replyTo: "3" } });
  });

  it("draft streaming in a group falls back to one edited message", async () => {
    const { bus, platform } = await setup({ streaming: "draft" });
    const replyId = "in-group:0";
    await bus.publishDraft({ replyId, channel: CHANNEL, chatId: "-100", text: "Thinking", chatType: "group" });
    await vi.waitFor(() => expect(platform.calls).toHaveLength(1));
    await bus.publishOutbound(reply("-100", "Done", { id: replyId }));
    await vi.waitFor(() => expect(platform.shown("-100")).toEqual(["Done"]));
    expect(platform.calls.map((call) => call.method)).toEqual(["send", "edit"]);
  });

  it("takes the chat type from the message, then from what the chat's earlier messages said, never from its id", async () => {
    const { bus, platform } = await setup({ streaming: "draft" });
    // A positive id with no type said: not private, so the draft is an edited message.
    await bus.publishDraft({ replyId: "unknown:0", channel: CHANNEL, chatId: "7", text: "Thinking" });
    await vi.waitFor(() => expect(platform.calls.map((call) => call.method)).toEqual(["send"]));
    await bus.publishOutbound(reply("7", "Done", { id: "unknown:0" }));
    await vi.waitFor(() => expect(platform.calls).toHaveLength(2));
    // Told once that chat 7 is private, a later reply that does not say (a job's) streams as a draft.
    await bus.publishDraft({ replyId: "told:0", channel: CHANNEL, chatId: "7", text: "Again", chatType: "private" });
    await vi.waitFor(() => expect(platform.calls).toHaveLength(3));
    await bus.publishDraft({ replyId: "job:0", channel: CHANNEL, chatId: "7", text: "From a job" });
    await vi.waitFor(() => expect(platform.calls).toHaveLength(4));
    expect(platform.calls.map((call) => call.method)).toEqual(["send", "edit", "draft", "draft"]);
  });

  it("sends transient notices (a team agent's streamed text) only to channels that asked for them", async () => {
    const transient = (chatId: string) => reply(chatId, "Team [X]: analyst is writing", { kind: "notice", metadata: { transient: true } });
    const plain = await setup({}, { showNotices: true });
    await plain.bus.publishOutbound(transient("A"));
    await plain.bus.publishOutbound(reply("A", "Team [X]: analyst done", { kind: "notice" }));
    await vi.waitFor(() => expect(plain.platform.shown("A")).toEqual(["Team [X]: analyst done"]));
    const live = await setup({}, { showNotices: true, showTransientNotices: true });
    await live.bus.publishOutbound(transient("B"));
    await vi.waitFor(() => expect(live.platform.shown("B")).toEqual(["Team [X]: analyst is writing"]));
  });

  it("gives every chunk an idempotency key stable across a redelivery", async () => {
    const { bus, platform } = await setup({ maxMessageLength: 30 });
    await bus.publishOutbound(reply("A", "first part of A.\n\nsecond part of A.", { id: "in-key:0" }));
    await vi.waitFor(() => expect(platform.sends()).toHaveLength(2));
    expect(platform.sends().map((send) => send.options.idempotencyKey)).toEqual(["in-key:0#0", "in-key:0#1"]);
  });

  it("sends the gateway's own reply as plain text through the chat's lane, once per id", async () => {
    const { dispatcher, platform } = await setup();
    await dispatcher.reply({ chatId: "42", id: "gateway:help:1", replyTo: "9", text: "Use **/new**" });
    await dispatcher.reply({ chatId: "42", id: "gateway:help:1", replyTo: "9", text: "Use **/new**" });
    expect(platform.sends()).toEqual([expect.objectContaining({ text: "Use **/new**", options: expect.objectContaining({ replyTo: "9", format: "plain" }) })]);
  });

  it("paces each chat on its own: a chat waiting for its interval does not hold up another", async () => {
    const { bus, platform, time } = await setup({ maxMessageLength: 30 });
    time.gate(true);
    await bus.publishOutbound(reply("A", "first part of A.\n\nsecond part of A."));
    await bus.publishOutbound(reply("A", "next message to A"));
    await bus.publishOutbound(reply("B", "message to B"));
    // A's second chunk waits for A's interval; B goes out meanwhile.
    await vi.waitFor(() => expect(platform.shown("B")).toEqual(["message to B"]));
    expect(platform.shown("A")).toEqual(["first part of A."]);
    expect(time.gates.map((gate) => gate.ms)).toEqual([1_000]);
    time.gate(false);
    time.openAll();
    await vi.waitFor(() => expect(platform.shown("A")).toHaveLength(3));
    expect(platform.shown("A")).toEqual(["first part of A.", "second part of A.", "next message to A"]);
  });

  it("stops: the bus subscription is closed and nothing more is sent", async () => {
    const { bus, platform, dispatcher } = await setup();
    await dispatcher.stop();
    await bus.publishOutbound(reply("42", "after stop"));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(platform.calls).toHaveLength(0);
  });
});

describe("dispatcher in groups", () => {
  const run = (statuses: string[], status = "running") => ({
    id: "wf-9",
    team: "Crew",
    status,
    createdAt: 1_000_000,
    replyTo: "trigger-9",
    ...(status === "running" ? {} : { completedAt: 1_003_000 }),
    agents: statuses.map((agentStatus, index) => ({ id: `a${index}`, label: `Agent ${index} (a${index})`, status: agentStatus })),
  });
  const progress = (chatId: string, statuses: string[], status?: string) =>
    reply(chatId, "Team [Crew]: a line", { kind: "notice", metadata: { workflow: { runId: "wf-9", run: run(statuses, status) } } });

  it("keeps a team run's notices in one status message threaded to the trigger with teamProgress, and shows none without", async () => {
    const { bus, platform } = await setup({}, { teamProgress: "status-message" });
    await bus.publishOutbound(progress("G", ["pending", "pending"]));
    await vi.waitFor(() => expect(platform.sends("G")).toHaveLength(1));
    await bus.publishOutbound(progress("G", ["completed", "running"]));
    await bus.publishOutbound(progress("G", ["completed", "completed"], "completed"));
    await vi.waitFor(() => expect(platform.shown("G")).toEqual(["Team [Crew] · done · 3 s\n✅ done · Agent 0 (a0)\n✅ done · Agent 1 (a1)"]));
    expect(platform.sends("G")[0]!.options.replyTo).toBe("trigger-9");
    expect(platform.calls.filter((call) => call.method === "edit").length).toBeGreaterThanOrEqual(1);

    const off = await setup({}, { teamProgress: "off" });
    await off.bus.publishOutbound(progress("H", ["pending"]));
    await off.bus.publishOutbound(reply("H", "after the notice"));
    await vi.waitFor(() => expect(off.platform.shown("H")).toEqual(["after the notice"]));
  });

  it("strips internal markers from finals and drafts", async () => {
    const { bus, platform } = await setup({ streaming: "edit" });
    await bus.watchDrafts(CHANNEL);
    await bus.publishDraft({ replyId: "in-marker:0", channel: CHANNEL, chatId: "M", text: "Result so far <!-- WORKFLOW_EXEC" });
    await vi.waitFor(() => expect(platform.shown("M")).toEqual(["Result so far"]));
    await bus.publishOutbound({ ...reply("M", "Result.\n\n<!-- WORKFLOW_EXECUTION_METADATA\nrun: wf-1\n-->"), id: "in-marker:0" });
    await vi.waitFor(() => expect(platform.shown("M")).toEqual(["Result."]));
    expect(platform.calls.some((call) => "text" in call && call.text.includes("<!--"))).toBe(false);
  });
});
