/**
 * Reasoning in every shape the OpenAI-compatible servers send it (`reasoning_content`, `reasoning`,
 * a `<think>` block opening the content) comes out as reasoning parts, never as answer text; and
 * prompt-cache hits are read from each server's own usage field.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createOpenAICompatibleProvider } from "../../../src/providers/openai-compatible.js";
import type { StreamPart } from "../../../src/providers/chat-model.js";
import { ThinkTagSplitter } from "../../../src/providers/think-tags.js";
import { startFakeOpenAI, type FakeOpenAIServer, type FakeOpenAIStep } from "../../support/fake-openai-server.js";
import { collect, textOf } from "./stream-helpers.js";

const servers: FakeOpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function streamOne(step: FakeOpenAIStep): Promise<StreamPart[]> {
  const server = await startFakeOpenAI({ script: [step] });
  servers.push(server);
  const provider = createOpenAICompatibleProvider({ name: "qwen", apiKey: "sk-test", baseURL: server.url });
  return collect(provider.stream({ model: "qwen3", messages: [{ role: "user", content: "hello" }] }));
}

const reasoningOf = (parts: StreamPart[]) => parts.flatMap((part) => (part.type === "reasoning-delta" ? [part.text] : [])).join("");

describe("reasoning from OpenAI-compatible servers", () => {
  it.each(["reasoning_content", "reasoning", "think-tags"] as const)("reads %s as reasoning, apart from the answer", async (reasoningField) => {
    const parts = await streamOne({ reasoning: ["The user greets; ", "greet back."], reasoningField, text: ["Hel", "lo!"] });
    expect(textOf(parts)).toBe("Hello!");
    expect(reasoningOf(parts)).toBe("The user greets; greet back.");
    expect(parts.filter((part) => part.type === "reasoning-block")).toEqual([{ type: "reasoning-block", block: { text: "The user greets; greet back." } }]);
  });

  it("keeps a think block of a tool-calling answer out of the text too", async () => {
    const parts = await streamOne({ reasoning: "I need the file.", reasoningField: "think-tags", toolCalls: [{ name: "read_file", arguments: '{"path":"a"}' }] });
    expect(textOf(parts)).toBe("");
    expect(reasoningOf(parts)).toBe("I need the file.");
    expect(parts.find((part) => part.type === "tool-call")).toBeDefined();
  });

  it("splits think tags cut anywhere, and leaves a <think> that does not open the content alone", () => {
    const run = (chunks: string[]) => {
      const splitter = new ThinkTagSplitter();
      const pieces = [...chunks.flatMap((chunk) => splitter.push(chunk)), ...splitter.end()];
      const join = (kind: string) => pieces.filter((piece) => piece.kind === kind).map((piece) => piece.text).join("");
      return { reasoning: join("reasoning"), text: join("text") };
    };
    expect(run(["\n<", "think", ">a</", "thi", "nk>", "\n\n", "B"])).toEqual({ reasoning: "a", text: "B" });
    expect(run(["Use <think> tags like this"])).toEqual({ reasoning: "", text: "Use <think> tags like this" });
    expect(run(["<", "b>bold</b>"])).toEqual({ reasoning: "", text: "<b>bold</b>" });
    expect(run(["<think>never closed"])).toEqual({ reasoning: "never closed", text: "" });
    expect(run(["<think>x < y </thinking> still</think>z"])).toEqual({ reasoning: "x < y </thinking> still", text: "z" });
  });
});

describe("prompt-cache hits from OpenAI-compatible servers", () => {
  it.each([
    { style: "openai", name: "prompt_tokens_details.cached_tokens" },
    { style: "deepseek", name: "DeepSeek's prompt_cache_hit_tokens (beside cached_tokens: 0)" },
    { style: "moonshot", name: "Moonshot's cached_tokens inside the last choice" },
  ] as const)("counts $name", async ({ style }) => {
    const parts = await streamOne({ text: "ok", usage: { promptTokens: 1_000, completionTokens: 2, cachedTokens: 768, cacheStyle: style } });
    expect(parts.at(-1)).toMatchObject({ type: "finish", usage: { inputTokens: 1_000, outputTokens: 2, cachedInputTokens: 768 } });
  });
});
