import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createOpenAICompatibleProvider, type OpenAICompatibleProviderOptions } from "../../../src/providers/openai-compatible.js";
import type { ChatMessage } from "../../../src/providers/chat-model.js";
import { startFakeOpenAI, type FakeOpenAIServer, type FakeOpenAIStep } from "../../support/fake-openai-server.js";
import { collect, collectFailure, textOf } from "./stream-helpers.js";

const servers: FakeOpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function setup(script: FakeOpenAIStep[], options: Partial<OpenAICompatibleProviderOptions> = {}) {
  const server = await startFakeOpenAI({ script });
  servers.push(server);
  const provider = createOpenAICompatibleProvider({ name: "deepseek", apiKey: "sk-test", baseURL: server.url, ...options });
  return { server, provider };
}

const hello: ChatMessage[] = [{ role: "user", content: "hello" }];

describe("openai-compatible provider", () => {
  it("streams text and finishes with usage", async () => {
    const { server, provider } = await setup([
      { text: ["Hel", "lo", " there"], usage: { promptTokens: 12, completionTokens: 3, cachedTokens: 4, reasoningTokens: 0 } },
    ]);
    const parts = await collect(provider.stream({ model: "deepseek-chat", messages: hello }));

    expect(parts.filter((part) => part.type === "text-delta").map((part) => part.text)).toEqual(["Hel", "lo", " there"]);
    expect(parts.at(-1)).toEqual({
      type: "finish",
      reason: "stop",
      usage: { inputTokens: 12, outputTokens: 3, cachedInputTokens: 4, reasoningTokens: 0 },
      model: "deepseek/deepseek-chat",
    });
    const [request] = server.requests;
    expect(request?.path).toBe("/v1/chat/completions");
    expect(request?.headers.authorization).toBe("Bearer sk-test");
    expect(request?.body).toMatchObject({
      model: "deepseek-chat",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "hello" }],
    });
  });

  it("streams reasoning_content and sends it back on the next request", async () => {
    const { server, provider } = await setup([
      { reasoning: ["Think", "ing..."], text: "Answer" },
      { text: "Second answer" },
    ]);
    const parts = await collect(provider.stream({ model: "deepseek-reasoner", messages: hello }));

    expect(parts.filter((part) => part.type === "reasoning-delta").map((part) => part.text)).toEqual(["Think", "ing..."]);
    const block = parts.find((part) => part.type === "reasoning-block");
    expect(block).toEqual({ type: "reasoning-block", block: { text: "Thinking..." } });
    // The block closes before the answer starts.
    expect(parts.findIndex((part) => part.type === "reasoning-block")).toBeLessThan(parts.findIndex((part) => part.type === "text-delta"));

    await collect(
      provider.stream({
        model: "deepseek-reasoner",
        messages: [...hello, { role: "assistant", content: textOf(parts), reasoning: [{ text: "Thinking..." }] }, { role: "user", content: "and?" }],
      }),
    );
    expect(server.requests[1]?.body.messages).toEqual([
      { role: "user", content: "hello" },
      { role: "assistant", content: "Answer", reasoning_content: "Thinking..." },
      { role: "user", content: "and?" },
    ]);
  });

  it("assembles a tool call whose arguments arrive split over several chunks", async () => {
    const argumentsText = JSON.stringify({ path: "notes/todo.md", lines: [1, 2, 3] });
    const { server, provider } = await setup([{ toolCalls: [{ id: "call_abc", name: "read_file", arguments: argumentsText }] }]);
    const parts = await collect(provider.stream({ model: "m", messages: hello }));

    expect(parts).toEqual([
      { type: "tool-call", call: { id: "call_abc", name: "read_file", arguments: argumentsText } },
      expect.objectContaining({ type: "finish", reason: "tool-calls" }),
    ]);
    expect(server.requests).toHaveLength(1);
  });

  it("keeps several tool calls of one response apart, in order", async () => {
    const { provider } = await setup([
      {
        text: "Let me look.",
        toolCalls: [
          { id: "call_1", name: "read_file", arguments: '{"path":"a.txt"}' },
          { id: "call_2", name: "list_dir", arguments: '{"path":"."}' },
          { id: "call_3", name: "web_search", arguments: '{"query":"vitest 4 release notes"}' },
        ],
      },
    ]);
    const parts = await collect(provider.stream({ model: "m", messages: hello }));

    expect(parts.filter((part) => part.type === "tool-call").map((part) => part.call)).toEqual([
      { id: "call_1", name: "read_file", arguments: '{"path":"a.txt"}' },
      { id: "call_2", name: "list_dir", arguments: '{"path":"."}' },
      { id: "call_3", name: "web_search", arguments: '{"query":"vitest 4 release notes"}' },
    ]);
    expect(textOf(parts)).toBe("Let me look.");
  });

  it("sends images as image_url parts, tools, tool results, temperature and max_tokens", async () => {
    const { server, provider } = await setup([{ text: "A cat." }]);
    await collect(
      provider.stream({
        model: "qwen-vl",
        temperature: 0.3,
        maxTokens: 256,
        tools: [{ name: "read_file", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } } }],
        messages: [
          { role: "system", content: "You are helpful." },
          {
            role: "user",
            content: [
              { type: "text", text: "What is this?" },
              { type: "image", mediaType: "image/png", data: "iVBORw0KGgo=" },
            ],
          },
          { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "read_file", arguments: '{"path":"a"}' }] },
          { role: "tool", toolCallId: "call_1", name: "read_file", content: "file text" },
        ],
      }),
    );
    const body = server.requests[0]?.body;
    expect(body).toMatchObject({ temperature: 0.3, max_tokens: 256 });
    expect(body).not.toHaveProperty("max_completion_tokens");
    expect(body?.tools).toEqual([
      { type: "function", function: { name: "read_file", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } } } },
    ]);
    expect(body?.messages).toEqual([
      { role: "system", content: "You are helpful." },
      {
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
        ],
      },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "read_file", arguments: '{"path":"a"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "file text" },
    ]);
  });

  it("sends each tool definition as it is on every call, and no tools field without tools", async () => {
    const { server, provider } = await setup(["one", "two", "three", "four", "five", "six"].map((text) => ({ text })));
    const odd = { name: "quote", description: 'Says "hi"\\n\u2028 ✓ \ud83d\ude00', parameters: { type: "object", properties: { "a\"b": { type: "string", enum: ["x", "\u0000"] } } } };
    const plain = { name: "read_file", description: "Read a file", parameters: { type: "object" } };
    const wire = (tool: typeof plain) => ({ type: "function", function: { name: tool.name, description: tool.description, parameters: tool.parameters } });
    // One list sent twice, then changed in place (a definition swapped, one added).
    const list = [odd, plain];
    const other = { name: "write_file", description: "Write a file", parameters: { type: "object" } };
    await collect(provider.stream({ model: "m", tools: list, messages: [{ role: "user", content: "hi" }] }));
    await collect(provider.stream({ model: "m", tools: [plain, odd], messages: [{ role: "user", content: 'again "quoted"' }] }));
    await collect(provider.stream({ model: "m", tools: [], messages: [{ role: "user", content: "none" }] }));
    await collect(provider.stream({ model: "m", tools: list, messages: [{ role: "user", content: "same list" }] }));
    list[0] = other;
    await collect(provider.stream({ model: "m", tools: list, messages: [{ role: "user", content: "changed" }] }));
    list.push(odd);
    await collect(provider.stream({ model: "m", tools: list, messages: [{ role: "user", content: "longer" }] }));
    expect(server.requests.map((request) => request.body?.tools)).toEqual([
      [wire(odd), wire(plain)],
      [wire(plain), wire(odd)],
      undefined,
      [wire(odd), wire(plain)],
      [wire(other), wire(plain)],
      [wire(other), wire(plain), wire(odd)],
    ]);
    expect(server.requests[1]?.body).toMatchObject({ model: "m", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: 'again "quoted"' }] });
  });

  it("uses max_completion_tokens when told to", async () => {
    const { server, provider } = await setup([{ text: "ok" }], { maxTokensField: "max_completion_tokens" });
    await collect(provider.stream({ model: "o4-mini", messages: hello, maxTokens: 100 }));
    expect(server.requests[0]?.body).toMatchObject({ max_completion_tokens: 100 });
    expect(server.requests[0]?.body).not.toHaveProperty("max_tokens");
  });

  it("sends no Authorization header without a key, and sends configured headers", async () => {
    const { server, provider } = await setup([{ text: "ok" }], { apiKey: undefined, headers: { "X-Title": "CountBot" } });
    await collect(provider.stream({ model: "llama3", messages: hello }));
    expect(server.requests[0]?.headers.authorization).toBeUndefined();
    expect(server.requests[0]?.headers["x-title"]).toBe("CountBot");
  });

  it.each([
    { name: "429 with Retry-After seconds", error: { status: 429, retryAfter: "7" }, kind: "rate-limit", retryAfterMs: 7000 },
    { name: "429 with retry-after-ms", error: { status: 429, retryAfterMs: "1500" }, kind: "rate-limit", retryAfterMs: 1500 },
    {
      name: "429 with an HTTP date",
      error: { status: 429, retryAfter: "Thu, 01 Jan 2026 00:00:30 GMT" },
      kind: "rate-limit",
      retryAfterMs: 30_000,
    },
    {
      name: "429 insufficient_quota",
      error: { status: 429, type: "insufficient_quota", code: "insufficient_quota", message: "You exceeded your current quota, please check your plan and billing details." },
      kind: "quota",
      retryAfterMs: undefined,
    },
    { name: "500", error: { status: 500 }, kind: "server", retryAfterMs: undefined },
    { name: "503 with Retry-After", error: { status: 503, retryAfter: "2" }, kind: "server", retryAfterMs: 2000 },
    { name: "401", error: { status: 401, message: "Incorrect API key provided" }, kind: "auth", retryAfterMs: undefined },
    { name: "403", error: { status: 403 }, kind: "auth", retryAfterMs: undefined },
    { name: "400", error: { status: 400, message: "Invalid 'messages'" }, kind: "bad-request", retryAfterMs: undefined },
    { name: "404", error: { status: 404, message: "model not found" }, kind: "bad-request", retryAfterMs: undefined },
    {
      name: "400 context_length_exceeded (OpenAI)",
      error: {
        status: 400,
        code: "context_length_exceeded",
        message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.",
      },
      kind: "context-overflow",
      retryAfterMs: undefined,
    },
    {
      name: "400 too long (DeepSeek)",
      error: { status: 400, message: "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens (62000 in the messages, 8000 in the completion)." },
      kind: "context-overflow",
      retryAfterMs: undefined,
    },
    { name: "400 input length (Qwen)", error: { status: 400, message: "Range of input length should be [1, 30720]" }, kind: "context-overflow", retryAfterMs: undefined },
    { name: "413 from a proxy", error: { status: 413, message: "Request Entity Too Large" }, kind: "context-overflow", retryAfterMs: undefined },
    { name: "400 max_tokens too large", error: { status: 400, message: "max_tokens is too large: 100000. This model supports at most 16384 completion tokens." }, kind: "bad-request", retryAfterMs: undefined },
  ])("maps $name to $kind", async ({ error, kind, retryAfterMs }) => {
    const { provider } = await setup([{ error }], { now: () => Date.parse("2026-01-01T00:00:00Z") });
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(failure.parts).toEqual([]);
    expect(failure.error).toMatchObject({ kind, status: error.status, retryAfterMs, model: "deepseek/m" });
  });

  it("reports a stream cut after output as a stream error, after the text it got", async () => {
    const { provider } = await setup([{ text: ["partial ", "answer", " never sent"], cutAfterChunks: 2 }]);
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(textOf(failure.parts)).toBe("partial answer");
    expect(failure.error.kind).toBe("stream");
  });

  it("treats a stream that ends without a finish as broken, not as a short answer", async () => {
    const { provider } = await setup([{ text: ["half", " an answer"], endAfterChunks: 1 }]);
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(textOf(failure.parts)).toBe("half");
    expect(failure.error.kind).toBe("stream");
  });

  it("maps an error event inside the stream", async () => {
    const { provider } = await setup([{ text: "so far", streamError: { message: "The server had an error", type: "server_error" } }]);
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(textOf(failure.parts)).toBe("so far");
    expect(failure.error.kind).toBe("server");
  });

  it("stops the stream when the signal aborts", async () => {
    const { provider } = await setup([{ text: "first", hangMs: 60_000 }]);
    const controller = new AbortController();
    const parts: string[] = [];
    const failure = await collectFailure(
      (async function* () {
        for await (const part of provider.stream({ model: "m", messages: hello, signal: controller.signal })) {
          if (part.type === "text-delta") parts.push(part.text);
          controller.abort();
          yield part;
        }
      })(),
    );
    expect(parts).toEqual(["first"]);
    expect(failure.error.kind).toBe("aborted");
  });

  it("times out a stream that goes silent", async () => {
    const { provider } = await setup([{ text: "first", hangMs: 60_000 }], { timeoutMs: 300 });
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(textOf(failure.parts)).toBe("first");
    expect(failure.error.kind).toBe("timeout");
  });

  it("times out a stream that only drips empty keep-alive chunks: they are not progress", async () => {
    const { provider } = await setup([{ text: "first", drip: { everyMs: 50 } }], { timeoutMs: 300 });
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(textOf(failure.parts)).toBe("first");
    expect(failure.error.kind).toBe("timeout");
  }, 10_000);

  it("cuts a lively stream that never finishes at the overall deadline", async () => {
    const { provider } = await setup([{ text: "start", drip: { everyMs: 20, text: "." } }], { timeoutMs: 5_000, deadlineMs: 400 });
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(textOf(failure.parts)).toMatch(/^start\.+$/);
    expect(failure.error.kind).toBe("timeout");
    expect(failure.error.message).toMatch(/400 ms/);
  }, 10_000);

  it("times out a server that never answers", async () => {
    const { provider } = await setup([{ text: "late", delayMs: 60_000 }], { timeoutMs: 300 });
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(failure.error.kind).toBe("timeout");
  });

  it("keeps its connections alive: calls one after another share one, and a burst reuses the last burst's", async () => {
    const { server, provider } = await setup(Array.from({ length: 13 }, () => ({ text: "ok" })));
    // The pool takes a connection back just after the body ends: the next call comes a turn later, as a turn's does.
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    for (let call = 0; call < 5; call += 1) {
      expect(textOf(await collect(provider.stream({ model: "m", messages: hello })))).toBe("ok");
      await settle();
    }
    expect(server.connections()).toBe(1);
    await Promise.all(Array.from({ length: 4 }, () => collect(provider.stream({ model: "m", messages: hello }))));
    await settle();
    const afterBurst = server.connections();
    expect(afterBurst).toBeLessThanOrEqual(4);
    await Promise.all(Array.from({ length: 4 }, () => collect(provider.stream({ model: "m", messages: hello }))));
    expect(server.connections()).toBe(afterBurst);
  });

  it("follows a server that redirects the request, as fetch would", async () => {
    const { server } = await setup([{ text: "redirected answer" }]);
    const redirector = createServer((request, response) => {
      request.resume();
      response.writeHead(307, { location: `${server.url}/chat/completions` }).end();
    });
    await new Promise<void>((resolve) => redirector.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = redirector.address() as AddressInfo;
      const provider = createOpenAICompatibleProvider({ name: "moved", apiKey: "sk-test", baseURL: `http://127.0.0.1:${port}/v1` });
      expect(textOf(await collect(provider.stream({ model: "m", messages: hello })))).toBe("redirected answer");
      expect(server.requests[0]?.body).toMatchObject({ model: "m", stream: true });
    } finally {
      redirector.closeAllConnections();
      await new Promise((resolve) => redirector.close(resolve));
    }
  });

  it("reports an unreachable server as a network error", async () => {
    const server = await startFakeOpenAI({ script: [] });
    await server.close();
    const provider = createOpenAICompatibleProvider({ name: "local", baseURL: server.url });
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(failure.error.kind).toBe("network");
  });

  it("says so when the fake's script runs out", async () => {
    const { provider } = await setup([]);
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(failure.error.message).toContain("script exhausted");
  });
});
