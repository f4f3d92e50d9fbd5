import { afterEach, describe, expect, it } from "vitest";
import { createAnthropicProvider, toAnthropicMessages, type AnthropicProviderOptions } from "../../../src/providers/anthropic.js";
import type { ChatMessage, StreamPart } from "../../../src/providers/chat-model.js";
import { startFakeAnthropic, type FakeAnthropicServer, type FakeAnthropicStep } from "../../support/fake-anthropic-server.js";
import { collect, collectFailure, textOf } from "./stream-helpers.js";

const servers: FakeAnthropicServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function setup(script: FakeAnthropicStep[], options: Partial<AnthropicProviderOptions> = {}) {
  const server = await startFakeAnthropic({ script });
  servers.push(server);
  const provider = createAnthropicProvider({ apiKey: "sk-ant-test", baseURL: server.url, ...options });
  return { server, provider };
}

const hello: ChatMessage[] = [
  { role: "system", content: "You are CountBot." },
  { role: "user", content: "hello" },
];

describe("anthropic provider", () => {
  it("streams text and finishes with usage", async () => {
    const { server, provider } = await setup([
      { text: ["Hi", " there"], usage: { inputTokens: 20, outputTokens: 7, cacheReadInputTokens: 100 } },
    ]);
    const parts = await collect(provider.stream({ model: "claude-test-model", messages: hello, maxTokens: 512, temperature: 0.5 }));

    expect(parts).toEqual([
      { type: "text-delta", text: "Hi" },
      { type: "text-delta", text: " there" },
      { type: "finish", reason: "stop", usage: { inputTokens: 120, outputTokens: 7, cachedInputTokens: 100 }, model: "anthropic/claude-test-model" },
    ]);
    const [request] = server.requests;
    expect(request?.path).toBe("/v1/messages");
    expect(request?.headers.authorization).toBe("Bearer sk-ant-test");
    expect(request?.headers["anthropic-version"]).toBeDefined();
    expect(request?.body).toMatchObject({
      model: "claude-test-model",
      max_tokens: 512,
      stream: true,
      system: [{ type: "text", text: "You are CountBot.", cache_control: { type: "ephemeral" } }],
      messages: [{ role: "user", content: [{ type: "text", text: "hello" }] }],
    });
    // API version 2026-10-21 has no temperature.
    expect(request?.body).not.toHaveProperty("temperature");
  });

  it("streams a thinking block with its signature and sends it back verbatim", async () => {
    const { server, provider } = await setup([
      { thinking: { text: ["Let me ", "think."], signature: "EqQBCkYIARgCIkD" }, redactedThinking: "EmwKAhgBEgy3", text: "42" },
      { text: "ok" },
    ]);
    const parts = await collect(provider.stream({ model: "claude-test-model", messages: hello }));

    expect(parts.filter((part) => part.type === "reasoning-delta").map((part) => part.text)).toEqual(["Let me ", "think."]);
    const blocks = parts.flatMap((part) => (part.type === "reasoning-block" ? [part.block] : []));
    expect(blocks).toEqual([{ text: "Let me think.", signature: "EqQBCkYIARgCIkD" }, { text: "", redactedData: "EmwKAhgBEgy3" }]);
    expect(textOf(parts)).toBe("42");

    await collect(
      provider.stream({
        model: "claude-test-model",
        messages: [...hello, { role: "assistant", content: "42", reasoning: blocks }, { role: "user", content: "why?" }],
      }),
    );
    expect(server.requests[1]?.body.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "hello" }] },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "Let me think.", signature: "EqQBCkYIARgCIkD" },
          { type: "redacted_thinking", data: "EmwKAhgBEgy3" },
          { type: "text", text: "42" },
        ],
      },
      { role: "user", content: [{ type: "text", text: "why?", cache_control: { type: "ephemeral" } }] },
    ]);
  });

  it("assembles tool_use input streamed as input_json_delta, one call per block", async () => {
    const first = JSON.stringify({ path: "notes/todo.md", limit: 20 });
    const second = JSON.stringify({ query: "weather in Lisbon" });
    const { server, provider } = await setup([
      {
        text: "Checking.",
        toolCalls: [
          { id: "toolu_01", name: "read_file", arguments: first },
          { id: "toolu_02", name: "web_search", arguments: second },
        ],
      },
    ]);
    const parts = await collect(
      provider.stream({
        model: "claude-test-model",
        messages: hello,
        tools: [{ name: "read_file", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } } }],
      }),
    );

    expect(parts.filter((part) => part.type === "tool-call").map((part) => part.call)).toEqual([
      { id: "toolu_01", name: "read_file", arguments: first },
      { id: "toolu_02", name: "web_search", arguments: second },
    ]);
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "tool-calls" });
    expect(server.requests[0]?.body.tools).toEqual([
      { name: "read_file", description: "Read a file", input_schema: { type: "object", properties: { path: { type: "string" } } } },
    ]);
  });

  it("maps a history with tool results and images to Anthropic messages", () => {
    const converted = toAnthropicMessages([
      { role: "system", content: "Be brief." },
      { role: "user", content: [{ type: "text", text: "What is in it?" }, { type: "image", mediaType: "image/jpeg", data: "/9j/4AAQ" }] },
      {
        role: "assistant",
        content: "",
        reasoning: [{ text: "unsigned reasoning from another provider" }],
        toolCalls: [
          { id: "toolu_1", name: "read_file", arguments: '{"path":"a.txt"}' },
          { id: "toolu_2", name: "list_dir", arguments: "{not json" },
        ],
      },
      { role: "tool", toolCallId: "toolu_1", name: "read_file", content: "contents of a" },
      { role: "tool", toolCallId: "toolu_2", name: "list_dir", content: "Error: bad arguments" },
      { role: "user", content: "thanks" },
    ]);
    expect(converted).toEqual({
      system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is in it?" },
            { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "/9j/4AAQ" } },
          ],
        },
        {
          role: "assistant",
          content: [
            { type: "tool_use", id: "toolu_1", name: "read_file", input: { path: "a.txt" } },
            { type: "tool_use", id: "toolu_2", name: "list_dir", input: {} },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_1", content: "contents of a" },
            { type: "tool_result", tool_use_id: "toolu_2", content: "Error: bad arguments" },
            { type: "text", text: "thanks", cache_control: { type: "ephemeral" } },
          ],
        },
      ],
    });
  });

  it.each([
    { name: "429 with retry-after", error: { status: 429, retryAfter: "12" }, kind: "rate-limit", retryAfterMs: 12_000 },
    { name: "529 overloaded", error: { status: 529 }, kind: "server", retryAfterMs: undefined },
    { name: "500", error: { status: 500 }, kind: "server", retryAfterMs: undefined },
    { name: "401", error: { status: 401 }, kind: "auth", retryAfterMs: undefined },
    { name: "402 billing", error: { status: 402, message: "Your credit balance is too low" }, kind: "quota", retryAfterMs: undefined },
    { name: "400", error: { status: 400, message: "messages: roles must alternate" }, kind: "bad-request", retryAfterMs: undefined },
    { name: "400 prompt is too long", error: { status: 400, message: "prompt is too long: 210385 tokens > 200000 maximum" }, kind: "context-overflow", retryAfterMs: undefined },
  ])("maps $name to $kind", async ({ error, kind, retryAfterMs }) => {
    const { provider } = await setup([{ error }]);
    const failure = await collectFailure(provider.stream({ model: "claude-test-model", messages: hello }));
    expect(failure.parts).toEqual([]);
    expect(failure.error).toMatchObject({ kind, status: error.status, retryAfterMs, model: "anthropic/claude-test-model" });
  });

  it("maps an overloaded error event in the stream to a server error", async () => {
    const { provider } = await setup([{ text: "so far", streamError: { type: "overloaded_error", message: "Overloaded" } }]);
    const failure = await collectFailure(provider.stream({ model: "claude-test-model", messages: hello }));
    expect(textOf(failure.parts)).toBe("so far");
    expect(failure.error.kind).toBe("server");
  });

  it("reports a cut stream as a stream error after the text it got", async () => {
    // message_start, ping, block start, first delta: then the connection drops.
    const { provider } = await setup([{ text: ["partial", " rest"], cutAfterChunks: 4 }]);
    const failure = await collectFailure(provider.stream({ model: "claude-test-model", messages: hello }));
    expect(textOf(failure.parts)).toBe("partial");
    expect(failure.error.kind).toBe("stream");
  });

  it("treats a stream that ends without a stop reason as broken", async () => {
    const { provider } = await setup([{ text: "half", endAfterChunks: 5 }]);
    const failure = await collectFailure(provider.stream({ model: "claude-test-model", messages: hello }));
    expect(textOf(failure.parts)).toBe("half");
    expect(failure.error.kind).toBe("stream");
  });

  it("stops the stream when the signal aborts", async () => {
    const { provider } = await setup([{ text: "first", hangMs: 60_000 }]);
    const controller = new AbortController();
    const seen: StreamPart[] = [];
    const failure = await collectFailure(
      (async function* () {
        for await (const part of provider.stream({ model: "claude-test-model", messages: hello, signal: controller.signal })) {
          seen.push(part);
          controller.abort();
          yield part;
        }
      })(),
    );
    expect(textOf(seen)).toBe("first");
    expect(failure.error.kind).toBe("aborted");
  });
});
