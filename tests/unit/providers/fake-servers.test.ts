import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { startFakeAnthropic } from "../../support/fake-anthropic-server.js";
import { startFakeOpenAI } from "../../support/fake-openai-server.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

describe("fake LLM servers", () => {
  it("answers OpenAI non-streaming requests, choosing steps with a function", async () => {
    const server = await startFakeOpenAI({
      script: (body, index) => ({ reasoning: "hmm", text: `answer ${index} to ${String(body.model)}`, toolCalls: [{ name: "t", arguments: '{"a":1}' }] }),
    });
    closers.push(server.close);
    const client = new OpenAI({ apiKey: "k", baseURL: server.url, maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(completion.choices[0]?.message).toMatchObject({
      content: "answer 0 to m",
      reasoning_content: "hmm",
      tool_calls: [{ id: "call_0", type: "function", function: { name: "t", arguments: '{"a":1}' } }],
    });
    expect(completion.choices[0]?.finish_reason).toBe("tool_calls");
  });

  it("answers Anthropic non-streaming requests", async () => {
    const server = await startFakeAnthropic({ script: [{ thinking: { text: "hmm", signature: "sig" }, text: "hello" }] });
    closers.push(server.close);
    const client = new Anthropic({ apiKey: "k", baseURL: server.url, maxRetries: 0 });
    const message = await client.messages.create({ model: "claude-test-model", max_tokens: 10, messages: [{ role: "user", content: "hi" }] });
    expect(message.content).toEqual([
      { type: "thinking", thinking: "hmm", signature: "sig" },
      { type: "text", text: "hello", citations: null },
    ]);
    expect(message.stop_reason).toBe("end_turn");
  });

  it("answers unknown routes with a 404 and records nothing", async () => {
    const server = await startFakeOpenAI({ script: [] });
    closers.push(server.close);
    const response = await fetch(`${server.url}/embeddings`, { method: "POST", body: "{}" });
    expect(response.status).toBe(404);
    expect(server.requests).toEqual([]);
  });
});
