import { afterEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/errors.js";
import { createAnthropicProvider } from "../../../src/providers/anthropic.js";
import { createOpenAICompatibleProvider } from "../../../src/providers/openai-compatible.js";
import { createChatModel, parseModelRef, type ChatModelOptions, type ChatModelTarget } from "../../../src/providers/resilient-model.js";
import type { ChatMessage } from "../../../src/providers/chat-model.js";
import { startFakeAnthropic, type FakeAnthropicStep } from "../../support/fake-anthropic-server.js";
import { startFakeOpenAI, type FakeOpenAIStep } from "../../support/fake-openai-server.js";
import { collect, collectFailure, recordingSleep, textOf } from "./stream-helpers.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function openAITarget(name: string, script: FakeOpenAIStep[], model = "model-a") {
  const server = await startFakeOpenAI({ script });
  closers.push(server.close);
  const target: ChatModelTarget = { provider: createOpenAICompatibleProvider({ name, apiKey: "key", baseURL: server.url }), model };
  return { server, target };
}

async function anthropicTarget(script: FakeAnthropicStep[], model = "claude-test-model") {
  const server = await startFakeAnthropic({ script });
  closers.push(server.close);
  const target: ChatModelTarget = { provider: createAnthropicProvider({ apiKey: "key", baseURL: server.url }), model };
  return { server, target };
}

function model(targets: ChatModelTarget[], options: Partial<ChatModelOptions> = {}) {
  const recorder = recordingSleep();
  const chatModel = createChatModel({ targets, retries: 3, baseDelayMs: 100, maxDelayMs: 10_000, sleep: recorder.sleep, random: () => 0, ...options });
  return { chatModel, waits: recorder.waits };
}

const messages: ChatMessage[] = [{ role: "user", content: "hi" }];

describe("resilient chat model", () => {
  it("is named after its first target", async () => {
    const { target } = await openAITarget("deepseek", [], "deepseek-chat");
    expect(createChatModel({ targets: [target] }).id).toBe("deepseek/deepseek-chat");
  });

  it("waits exactly the server's Retry-After on a 429, then succeeds", async () => {
    const { server, target } = await openAITarget("openai", [{ error: { status: 429, retryAfter: "3" } }, { text: "done" }]);
    const { chatModel, waits } = model([target]);
    const parts = await collect(chatModel.stream({ messages }));
    expect(textOf(parts)).toBe("done");
    expect(waits).toEqual([3000]);
    expect(server.requests).toHaveLength(2);
  });

  it("caps the server's Retry-After at maxDelayMs", async () => {
    const { target } = await openAITarget("openai", [{ error: { status: 429, retryAfter: "3600" } }, { text: "done" }]);
    const { chatModel, waits } = model([target], { maxDelayMs: 5000 });
    await collect(chatModel.stream({ messages }));
    expect(waits).toEqual([5000]);
  });

  it("retries a 500 with exponential backoff", async () => {
    const { server, target } = await openAITarget("openai", [{ error: { status: 500 } }, { error: { status: 503 } }, { text: "finally" }]);
    const { chatModel, waits } = model([target]);
    expect(textOf(await collect(chatModel.stream({ messages })))).toBe("finally");
    // random() = 0 gives the lower half of the jitter range: ceiling / 2.
    expect(waits).toEqual([50, 100]);
    expect(server.requests).toHaveLength(3);
  });

  it("does not retry an exhausted quota", async () => {
    const quota = { status: 429, code: "insufficient_quota", type: "insufficient_quota", message: "You exceeded your current quota." };
    const { server, target } = await openAITarget("openai", [{ error: quota }]);
    const { chatModel, waits } = model([target]);
    const failure = await collectFailure(chatModel.stream({ messages }));
    expect(failure.error.kind).toBe("quota");
    expect(server.requests).toHaveLength(1);
    expect(waits).toEqual([]);
  });

  it("falls back to the next model on an exhausted quota", async () => {
    const quota = { status: 429, code: "insufficient_quota", message: "You exceeded your current quota." };
    const primary = await openAITarget("openai", [{ error: quota }], "gpt-4o-mini");
    const fallback = await anthropicTarget([{ text: "from claude" }]);
    const { chatModel, waits } = model([primary.target, fallback.target]);
    const parts = await collect(chatModel.stream({ messages }));
    expect(textOf(parts)).toBe("from claude");
    expect(parts.at(-1)).toMatchObject({ type: "finish", model: "anthropic/claude-test-model" });
    expect(primary.server.requests).toHaveLength(1);
    expect(fallback.server.requests).toHaveLength(1);
    expect(waits).toEqual([]);
  });

  it("tries the fallbacks in order after the retries run out", async () => {
    const order: string[] = [];
    const first = await openAITarget("first", [{ error: { status: 503 } }, { error: { status: 503 } }]);
    const second = await openAITarget("second", [{ error: { status: 401 } }]);
    const third = await openAITarget("third", [{ text: "third answers" }]);
    const logged = { warn: (fields: Record<string, unknown>) => order.push(String(fields.model)) };
    const { chatModel } = model([first.target, second.target, third.target], { retries: 1, logger: logged });
    expect(textOf(await collect(chatModel.stream({ messages })))).toBe("third answers");
    expect([first.server.requests.length, second.server.requests.length, third.server.requests.length]).toEqual([2, 1, 1]);
    expect(order).toEqual(["first/model-a", "first/model-a", "second/model-a"]);
  });

  it("reports every failure when all models fail", async () => {
    const first = await openAITarget("first", [{ error: { status: 401 } }]);
    const second = await openAITarget("second", [{ error: { status: 402, message: "insufficient credits" } }]);
    const { chatModel } = model([first.target, second.target]);
    const failure = await collectFailure(chatModel.stream({ messages }));
    expect(failure.error.kind).toBe("quota");
    expect(failure.error.message).toContain("first/model-a");
    expect(failure.error.message).toContain("second/model-a");
  });

  it("falls back, without retrying, to a model whose window may hold a prompt the first one's does not", async () => {
    const tooLong = { status: 400, code: "context_length_exceeded", message: "This model's maximum context length is 8192 tokens." };
    const primary = await openAITarget("openai", [{ error: tooLong }], "small-window");
    const fallback = await anthropicTarget([{ text: "from the larger window" }]);
    const { chatModel, waits } = model([primary.target, fallback.target]);
    expect(textOf(await collect(chatModel.stream({ messages })))).toBe("from the larger window");
    expect(primary.server.requests).toHaveLength(1);
    expect(waits).toEqual([]);
  });

  it("throws a bad request at once, without fallback", async () => {
    const primary = await openAITarget("openai", [{ error: { status: 400, message: "Invalid 'messages[0]'" } }]);
    const fallback = await openAITarget("backup", [{ text: "unused" }]);
    const { chatModel } = model([primary.target, fallback.target]);
    const failure = await collectFailure(chatModel.stream({ messages }));
    expect(failure.error.kind).toBe("bad-request");
    expect(fallback.server.requests).toHaveLength(0);
  });

  it("never retries or falls back once output was streamed", async () => {
    const primary = await openAITarget("openai", [{ text: ["Once upon", " a time", " there"], cutAfterChunks: 2 }, { text: "again" }]);
    const fallback = await openAITarget("backup", [{ text: "other" }]);
    const { chatModel, waits } = model([primary.target, fallback.target]);
    const failure = await collectFailure(chatModel.stream({ messages }));
    expect(textOf(failure.parts)).toBe("Once upon a time");
    expect(failure.error.kind).toBe("stream");
    expect(primary.server.requests).toHaveLength(1);
    expect(fallback.server.requests).toHaveLength(0);
    expect(waits).toEqual([]);
  });

  it("retries a stream cut before any output", async () => {
    const { server, target } = await openAITarget("openai", [{ text: "lost", cutAfterChunks: 0 }, { text: "second try" }]);
    const { chatModel, waits } = model([target]);
    expect(textOf(await collect(chatModel.stream({ messages })))).toBe("second try");
    expect(server.requests).toHaveLength(2);
    expect(waits).toHaveLength(1);
  });

  it("retries an Anthropic stream that was cut before any content", async () => {
    const { server, target } = await anthropicTarget([{ text: "lost", cutAfterChunks: 2 }, { text: "second try" }]);
    const { chatModel } = model([target]);
    expect(textOf(await collect(chatModel.stream({ messages })))).toBe("second try");
    expect(server.requests).toHaveLength(2);
  });

  it("stops the stream on abort and does not retry", async () => {
    const { server, target } = await openAITarget("openai", [{ text: "first", hangMs: 60_000 }, { text: "unused" }]);
    const { chatModel } = model([target]);
    const controller = new AbortController();
    const failure = await collectFailure(
      (async function* () {
        for await (const part of chatModel.stream({ messages, signal: controller.signal })) {
          controller.abort();
          yield part;
        }
      })(),
    );
    expect(textOf(failure.parts)).toBe("first");
    expect(failure.error.kind).toBe("aborted");
    expect(server.requests).toHaveLength(1);
  });

  it("abandons a backoff wait when the signal aborts", async () => {
    const { server, target } = await openAITarget("openai", [{ error: { status: 429, retryAfter: "30" } }, { text: "unused" }]);
    const controller = new AbortController();
    // A sleep that never ends by itself: only the abort can end the wait.
    const sleep = () => {
      controller.abort();
      return new Promise<void>(() => {});
    };
    const chatModel = createChatModel({ targets: [target], retries: 3, sleep });
    const failure = await collectFailure(chatModel.stream({ messages, signal: controller.signal }));
    expect(failure.error.kind).toBe("aborted");
    expect(server.requests).toHaveLength(1);
  });

  it("reports usage from the model that answered", async () => {
    const { target } = await openAITarget("openai", [{ text: "hi", usage: { promptTokens: 30, completionTokens: 2 } }]);
    const { chatModel } = model([target]);
    const parts = await collect(chatModel.stream({ messages }));
    expect(parts.at(-1)).toEqual({
      type: "finish",
      reason: "stop",
      usage: { inputTokens: 30, outputTokens: 2, cachedInputTokens: 0, reasoningTokens: 0 },
      model: "openai/model-a",
    });
  });
});

describe("parseModelRef", () => {
  it("splits at the first slash", () => {
    expect(parseModelRef("openai/gpt-4o-mini")).toEqual({ provider: "openai", model: "gpt-4o-mini" });
    expect(parseModelRef("openrouter/anthropic/claude-sonnet-4")).toEqual({ provider: "openrouter", model: "anthropic/claude-sonnet-4" });
  });

  it.each(["gpt-4o", "/gpt-4o", "openai/"])("rejects %s", (reference) => {
    expect(() => parseModelRef(reference)).toThrow(ConfigError);
  });
});
