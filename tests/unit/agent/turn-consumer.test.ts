import { readdir } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import pino from "pino";
import { TurnConsumer } from "../../../src/agent/turn-consumer.js";
import type { OutboundMessage } from "../../../src/bus/message.js";
import type { Claim, MessageBus } from "../../../src/bus/message-bus.js";
import { createFileMemoryStore } from "../../../src/memory/memory.js";
import type { ChatMessage } from "../../../src/providers/chat-model.js";
import { type Harness, gate, startHarness } from "../../support/agent-harness.js";
import { scriptedModel } from "../../support/scripted-model.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function lastUserText(messages: ChatMessage[]): string {
  const last = messages.at(-1);
  return last?.role === "user" && typeof last.content === "string" ? last.content : "";
}

describe("TurnConsumer on the memory bus", () => {
  it("answers a message with a final whose id derives from the inbound id", async () => {
    harness = await startHarness(scriptedModel([{ text: ["Hi ", "there"] }]));
    const message = await harness.send("a", "hello");
    const [final] = await harness.waitForFinals(1);
    expect(final).toMatchObject({ id: `${message.id}:0`, chatId: "a", content: "Hi there", kind: "final", metadata: { answers: [message.id] } });
  });

  it("coalesces messages that arrive during a turn into the next turn, answered in order", async () => {
    const hold = gate();
    const model = scriptedModel([]);
    const requests: string[] = [];
    model.stream = async function* (request) {
      const text = lastUserText(request.messages);
      requests.push(text);
      if (requests.length === 1) await hold.promise;
      yield { type: "text-delta", text: `answer to: ${text}` };
      yield { type: "finish", reason: "stop", usage: { inputTokens: 1, outputTokens: 1 }, model: "scripted" };
    };
    harness = await startHarness(model);
    await harness.send("a", "first");
    while (requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    await harness.send("a", "second");
    await harness.send("a", "third");
    hold.open();
    const finals = await harness.waitForFinals(2);
    expect(requests).toEqual(["first", "second\n\nthird"]);
    expect(finals.map((final) => final.content)).toEqual(["answer to: first", "answer to: second\n\nthird"]);
  });

  it("carries the turn's token usage, summed over its model calls, in the final's metadata", async () => {
    const usage = { inputTokens: 30, outputTokens: 4 };
    harness = await startHarness(scriptedModel([{ toolCalls: [{ name: "list_dir", arguments: {} }], usage }, { text: "done", usage }]), { config: { tools: { exec: { enabled: false } } } });
    await harness.send("a", "look");
    const [final] = await harness.waitForFinals(1);
    expect(final!.metadata.usage).toEqual({ inputTokens: 60, outputTokens: 8 });
  });

  it("never coalesces a message marked ownTurn: each gets a turn and a reply of its own", async () => {
    const hold = gate();
    const model = scriptedModel([]);
    const requests: string[] = [];
    model.stream = async function* (request) {
      const text = lastUserText(request.messages);
      requests.push(text);
      if (requests.length === 1) await hold.promise;
      yield { type: "text-delta", text: `answer to: ${text}` };
      yield { type: "finish", reason: "stop", usage: { inputTokens: 1, outputTokens: 1 }, model: "scripted" };
    };
    harness = await startHarness(model);
    await harness.send("a", "first");
    while (requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const second = await harness.send("a", "second", { metadata: { ownTurn: true } });
    const third = await harness.send("a", "third", { metadata: { ownTurn: true } });
    const fourth = await harness.send("a", "fourth");
    const fifth = await harness.send("a", "fifth");
    hold.open();
    const finals = await harness.waitForFinals(4);
    expect(requests).toEqual(["first", "second", "third", "fourth\n\nfifth"]);
    expect(finals.slice(1).map((final) => final.metadata.answers)).toEqual([[second.id], [third.id], [fourth.id, fifth.id]]);
  });

  it("runs other sessions while one session's turn is busy", async () => {
    const hold = gate();
    const model = scriptedModel([]);
    model.stream = async function* (request) {
      const text = lastUserText(request.messages);
      if (text === "slow") await hold.promise;
      yield { type: "text-delta", text: `done ${text}` };
      yield { type: "finish", reason: "stop", usage: { inputTokens: 1, outputTokens: 1 }, model: "scripted" };
    };
    harness = await startHarness(model);
    await harness.send("a", "slow");
    await harness.send("b", "fast");
    const [first] = await harness.waitForFinals(1);
    expect(first).toMatchObject({ chatId: "b", content: "done fast" });
    hold.open();
    const finals = await harness.waitForFinals(2);
    expect(finals[1]).toMatchObject({ chatId: "a", content: "done slow" });
  });

  it("keeps history across turns and forgets it after /new", async () => {
    const model = scriptedModel(() => ({ text: "ok" }));
    harness = await startHarness(model);
    await harness.send("a", "my name is Ada");
    await harness.waitForFinals(1);
    await harness.send("a", "what is my name?");
    await harness.waitForFinals(2);
    expect(model.requests[1]!.messages.map((message) => message.role)).toEqual(["system", "user", "assistant", "user"]);
    await harness.send("a", "/new");
    const [, , reset] = await harness.waitForFinals(3);
    expect(reset!.content).toBe("Started a new conversation.");
    await harness.send("a", "hello again");
    await harness.waitForFinals(4);
    expect(model.requests[2]!.messages.map((message) => message.role)).toEqual(["system", "user"]);
  });

  it("stops a running turn when cancel is requested for its session", async () => {
    harness = await startHarness(scriptedModel([{ text: "Working on it", hang: true }]));
    await harness.send("a", "do something long");
    while (harness.drafts.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    await harness.runtime.bus.requestCancel("test:a");
    const [final] = await harness.waitForFinals(1);
    expect(final!.content).toBe("Working on it\n\n[stopped]");
  });

  it("publishes no draft for a reply that is done within the draft interval", async () => {
    harness = await startHarness(scriptedModel([{ text: ["Quick ", "answer."] }]));
    await harness.send("a", "hello");
    const [final] = await harness.waitForFinals(1);
    expect(final!.content).toBe("Quick answer.");
    expect(harness.drafts).toEqual([]);
  });

  it("publishes no drafts of a chat nobody watches, and still answers it", async () => {
    harness = await startHarness(scriptedModel([{ text: "Working on it", hang: true }]), { watchDrafts: false });
    await harness.send("a", "do something long");
    // Several draft intervals pass while the model hangs mid-reply.
    await new Promise((resolve) => setTimeout(resolve, 600));
    await harness.runtime.bus.requestCancel("test:a");
    const [final] = await harness.waitForFinals(1);
    expect(final!.content).toBe("Working on it\n\n[stopped]");
    expect(harness.drafts).toEqual([]);
  });

  it("streams drafts that grow into the final, and announces tool calls", async () => {
    harness = await startHarness(
      scriptedModel([{ text: "Looking.", toolCalls: [{ name: "list_dir", arguments: {} }] }, { text: ["The ", "workspace ", "is ", "empty."] }]),
    );
    const message = await harness.send("a", "what is in the workspace?");
    const [final] = await harness.waitForFinals(1);
    expect(final!.content).toBe("Looking.\n\nThe workspace is empty.");
    expect(harness.notices).toHaveLength(1);
    expect(harness.notices[0]).toMatchObject({ id: `${message.id}:1`, kind: "notice", metadata: { tool: "list_dir" } });
    expect(harness.drafts.length).toBeGreaterThan(0);
    for (const draft of harness.drafts) {
      expect(draft.replyId).toBe(final!.id);
      expect(final!.content.startsWith(draft.text)).toBe(true);
    }
  });

  it("replies with the origin chat for a system message", async () => {
    harness = await startHarness(scriptedModel([{ text: "Your report is ready." }]));
    await harness.send("test:a", "subagent finished: report.md", { channel: "system" });
    const [final] = await harness.waitForFinals(1);
    expect(final).toMatchObject({ channel: "test", chatId: "a", content: "Your report is ready." });
  });

  it("reports a failing turn to the user and moves on", async () => {
    harness = await startHarness(scriptedModel([{ text: "never used" }, { text: "second works" }]));
    const store = harness.runtime.store.sessions;
    const original = store.append.bind(store);
    let failOnce = true;
    store.append = async (key, entries) => {
      if (failOnce) {
        failOnce = false;
        throw new Error("disk full");
      }
      return original(key, entries);
    };
    await harness.send("a", "one");
    const [failure] = await harness.waitForFinals(1);
    expect(failure!.content).toContain("disk full");
    await harness.send("a", "two");
    const [, next] = await harness.waitForFinals(2);
    expect(next!.content).toBe("second works");
  });

  it("does not run a turn twice when its answer is already in the history (crash after save)", async () => {
    const model = scriptedModel([{ text: "the one answer" }]);
    harness = await startHarness(model);
    const message = await harness.send("a", "question");
    await harness.waitForFinals(1);
    // The same inbound message again, as after a crash between saving and acking.
    await harness.runtime.bus.publishInbound({ ...message });
    const [, replay] = await harness.waitForFinals(2);
    expect(replay).toMatchObject({ id: `${message.id}:0`, content: "the one answer" });
    expect(model.requests).toHaveLength(1);
  });

  it("publishes nothing for a turn whose lease was taken over", async () => {
    const model = scriptedModel([{ text: "stale answer" }, { text: "fresh answer" }]);
    harness = await startHarness(model);
    const bus = harness.runtime.bus;
    const holds = bus.holds.bind(bus);
    let lost = true;
    bus.holds = async (claim) => {
      if (lost) {
        lost = false;
        return false;
      }
      return holds(claim);
    };
    await harness.send("a", "question");
    while (model.requests.length === 0 || harness.runtime.consumer.active > 0) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(harness.finals).toHaveLength(0);
    expect(await harness.runtime.store.sessions.load("test:a")).toMatchObject({ history: [] });
  });
});

describe("Agent context overflow", () => {
  it("summarizes overflowing history into memory before the turn, and starts a new memory file when it is full", async () => {
    const model = scriptedModel((request) => {
      const system = request.messages[0];
      if (system?.role === "system" && system.content.startsWith("You condense")) return { text: "- summary of the early chat" };
      return { text: "ok" };
    });
    harness = await startHarness(model, { config: { agent: { maxHistory: 4 } } });
    for (let index = 0; index < 3; index += 1) {
      await harness.send("a", `message ${index}`);
      await harness.waitForFinals(index + 1);
    }
    // Fill the chat's memory to just under its cap: the next summary cannot be appended.
    const chatMemory = createFileMemoryStore({ workspace: harness.runtime.workspace, scope: "chat" });
    await chatMemory.write("test:a", "x".repeat(64 * 1024 - 10));
    await harness.send("a", "message 3");
    await harness.waitForFinals(4);
    const turn = model.requests.at(-1)!;
    expect(turn.messages.filter((message) => message.role !== "system").length).toBeLessThanOrEqual(4);
    expect(String(turn.messages[0]!.content)).toContain("summary of the early chat");
    const memoryText = await chatMemory.read("test:a");
    expect(memoryText).toContain("Older memory is in");
    expect(memoryText).toContain("summary of the early chat");
    const siblings = await readdir(path.dirname(path.join(harness.runtime.workspace, chatMemory.location("test:a"))));
    expect(siblings.some((name) => name.startsWith("MEMORY-until-"))).toBe(true);
  });
});

describe("TurnConsumer poison turns", () => {
  it("dead-letters a batch whose turns keep dying and tells the user once", async () => {
    const model = scriptedModel(() => ({ text: "fine" }));
    harness = await startHarness(model);
    const bus = harness.runtime.bus;
    // Simulate three workers that died mid-turn: each claimed the batch and vanished.
    await harness.runtime.consumer.stop(0);
    const message = await harness.send("a", "the message that crashes workers");
    for (let index = 0; index < 3; index += 1) {
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      await bus.release(claim!);
    }
    const loop = new TurnConsumer({ bus, agent: harness.runtime.agent, logger: pino({ level: "silent" }), concurrency: 2 });
    void loop.run();
    const [final] = await harness.waitForFinals(1);
    await loop.stop(0);
    expect(final).toMatchObject({ id: `${message.id}:0`, metadata: { answers: [message.id] } });
    expect(final!.content).toContain("failed repeatedly");
    expect(model.requests).toHaveLength(0);
    const [letter] = await bus.deadLetters();
    expect(letter!.messages.map((item) => item.id)).toEqual([message.id]);
  });
});

describe("TurnConsumer on a bus that keeps history with the ack", () => {
  it("hands the turn's history entries to the ack (one step with the reply) and appends none to the store itself", async () => {
    const model = scriptedModel((request) => ({ text: `answer to ${lastUserText(request.messages)}` }));
    harness = await startHarness(model);
    const inner = harness.runtime.bus;
    await harness.runtime.consumer.stop(0);
    const acked: Array<{ reply?: string; history?: string[] }> = [];
    // The Redis bus beside the Redis store does this in its ack script; here the entries are only recorded.
    const bus: MessageBus = Object.assign(Object.create(inner) as MessageBus, {
      historyOnAck: true,
      ack: (claim: Claim, consumed?: number, reply?: OutboundMessage, history?: string[]) => {
        acked.push({ reply: reply?.content, history });
        return inner.ack(claim, consumed, reply);
      },
    });
    const message = await harness.send("a", "keep this");
    const loop = new TurnConsumer({ bus, agent: harness.runtime.agent, logger: pino({ level: "silent" }), concurrency: 1 });
    void loop.run();
    await harness.waitForFinals(1);
    await loop.stop(0);
    expect(acked).toHaveLength(1);
    expect(acked[0]!.reply).toBe("answer to keep this");
    const entries = acked[0]!.history!.map((text) => JSON.parse(text) as { role: string; content: string; messageIds?: string[] });
    expect(entries.map((entry) => [entry.role, entry.content])).toEqual([
      ["user", "keep this"],
      ["assistant", "answer to keep this"],
    ]);
    expect(entries[0]!.messageIds).toEqual([message.id]);
    expect((await harness.runtime.store.sessions.load("test:a")).history).toEqual([]);
  });
});

describe("TurnConsumer and payloads the bus refused", () => {
  it("dead-letters the stand-in of a payload that did not parse, tells the chat, and answers the next message", async () => {
    const model = scriptedModel((request) => ({ text: `answer to ${lastUserText(request.messages)}` }));
    harness = await startHarness(model);
    const bus = harness.runtime.bus;
    await harness.runtime.consumer.stop(0);
    // What the Redis bus hands over in a damaged payload's place (src/bus/payloads.ts).
    const refused = await harness.send("a", "", { metadata: { refusedPayload: "senderId: Invalid input: expected string" } });
    const next = await harness.send("a", "two");
    const loop = new TurnConsumer({ bus, agent: harness.runtime.agent, logger: pino({ level: "silent" }), concurrency: 1 });
    void loop.run();
    const finals = await harness.waitForFinals(2);
    await loop.stop(0);
    expect(finals.map((final) => [final.metadata.answers, final.content])).toEqual([
      [[refused.id], "Sorry, I could not read that message. Please send it again."],
      [[next.id], "answer to two"],
    ]);
    expect(model.requests.map((request) => lastUserText(request.messages))).toEqual(["two"]);
    const [letter] = await bus.deadLetters();
    expect(letter!.reason).toBe("its payload did not match the message model (senderId: Invalid input: expected string)");
  });
});

describe("TurnConsumer after crashes and during shutdown", () => {
  it("repeats the saved reply for the answered part of a batch and runs a turn for the rest", async () => {
    const model = scriptedModel((request) => ({ text: `answer to ${lastUserText(request.messages)}` }));
    harness = await startHarness(model);
    const first = await harness.send("a", "one");
    await harness.waitForFinals(1);
    // As if the worker died after saving "one" but before acking it, while "two" arrived.
    const bus = harness.runtime.bus;
    await harness.runtime.consumer.stop(0);
    await bus.publishInbound({ ...first });
    const second = await harness.send("a", "two");
    const loop = new TurnConsumer({ bus, agent: harness.runtime.agent, logger: pino({ level: "silent" }), concurrency: 1 });
    void loop.run();
    const finals = await harness.waitForFinals(3);
    await loop.stop(0);
    expect(finals[1]).toMatchObject({ id: `${first.id}:0`, content: "answer to one", metadata: { answers: [first.id] } });
    expect(finals[2]).toMatchObject({ id: `${second.id}:0`, content: "answer to two", metadata: { answers: [second.id] } });
    expect(model.requests).toHaveLength(2);
  });

  it("writes nothing for a turn cancelled because its lease renewal failed, though the lease still looks held", async () => {
    // A renewal judged with a stale clock (replayed after an outage) says "lost" while holds() still
    // says "held": the abort is the lease's, not the user's, so no "[stopped]" may be saved.
    const model = scriptedModel([{ text: "Working", hang: true }, { text: "the real answer" }]);
    harness = await startHarness(model, { config: { redis: { leaseTtlMs: 1_000 } } });
    const bus = harness.runtime.bus;
    const renew = bus.renew.bind(bus);
    let failures = 1;
    bus.renew = async (claim) => (failures-- > 0 ? false : renew(claim));
    await harness.send("a", "long job");
    while (model.requests.length === 0 || harness.runtime.consumer.active > 0) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(harness.finals).toHaveLength(0);
    expect((await harness.runtime.store.sessions.load("test:a")).history).toEqual([]);
    // The lease runs out and the turn runs again: the real answer, not a repeated "[stopped]".
    const [final] = await harness.waitForFinals(1);
    expect(final?.content).toBe("the real answer");
  });

  it("gives a turn cut short by shutdown back to the bus instead of answering [stopped]", async () => {
    const model = scriptedModel([{ text: "Working", hang: true }]);
    harness = await startHarness(model);
    const message = await harness.send("a", "long job");
    while (harness.drafts.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    await harness.runtime.consumer.stop(0);
    expect(harness.finals).toHaveLength(0);
    const claim = await harness.runtime.bus.claimSession({ timeoutMs: 1_000 });
    expect(claim).toMatchObject({ attempt: 2, messages: [expect.objectContaining({ id: message.id })] });
    // No trace in the history either, or the next worker would replay "[stopped]".
    expect((await harness.runtime.store.sessions.load("test:a")).history).toEqual([]);
  });
});
