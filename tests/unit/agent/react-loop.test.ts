import { mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { type TurnEvent, limitNote, runReactLoop } from "../../../src/agent/react-loop.js";
import { ProviderError, ToolError } from "../../../src/errors.js";
import type { ChatMessage } from "../../../src/providers/chat-model.js";
import { createListDirTool } from "../../../src/tools/list-dir.js";
import { createReadFileTool } from "../../../src/tools/read-file.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import { defineTool } from "../../../src/tools/tool.js";
import { type Script, scriptedModel } from "../../support/scripted-model.js";

let workspace: string;

beforeEach(async () => {
  workspace = await realpath(await mkdtemp(path.join(tmpdir(), "countbot-turn-")));
  await writeFile(path.join(workspace, "notes.txt"), "the launch code is 4242\n");
});
afterEach(async () => {
  await rm(workspace, { recursive: true, force: true });
});

function registry(...extra: Parameters<ToolRegistry["register"]>[0][]): ToolRegistry {
  const tools = new ToolRegistry().register(createReadFileTool({ maxBytes: 100_000 })).register(createListDirTool());
  for (const tool of extra) tools.register(tool);
  return tools;
}

function turn(script: Script, options: Partial<Parameters<typeof runReactLoop>[0]> = {}) {
  const model = scriptedModel(script);
  const events: TurnEvent[] = [];
  const sleeps: number[] = [];
  const input: ChatMessage[] = [
    { role: "system", content: "system prompt" },
    { role: "user", content: "hello" },
  ];
  const run = runReactLoop({
    model,
    tools: registry(),
    messages: input,
    maxIterations: 25,
    maxRetries: 3,
    retryDelayMs: 1000,
    toolContext: { sessionKey: "test:1", channel: "test", chatId: "1", workspace, restrictToWorkspace: true },
    listener: (event) => void events.push(event),
    sleep: async (ms) => void sleeps.push(ms),
    ...options,
  });
  return { model, events, sleeps, run };
}

/** Every tool call in the transcript is followed by exactly one result with its id. */
function expectPaired(messages: ChatMessage[]): void {
  const asked = messages.flatMap((message) => (message.role === "assistant" ? (message.toolCalls ?? []).map((call) => call.id) : []));
  const answered = messages.flatMap((message) => (message.role === "tool" ? [message.toolCallId] : []));
  expect(answered.sort()).toEqual(asked.sort());
}

describe("runReactLoop", () => {
  it("ends when the model answers without tool calls, streaming exactly the reply", async () => {
    const { run, events } = turn([{ text: ["Hel", "lo ", "there"] }]);
    const result = await run;
    expect(result.stopReason).toBe("completed");
    expect(result.reply).toBe("Hello there");
    expect(result.iterations).toBe(1);
    const streamed = events.flatMap((event) => (event.type === "delta" ? [event.text] : [])).join("");
    expect(streamed).toBe(result.reply);
    expect(events.at(-1)?.type).toBe("done");
  });

  it("runs a tool call, feeds the result back and answers with it", async () => {
    const { run, model, events } = turn([
      { text: "Let me look.", toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] },
      { text: "The code is 4242." },
    ]);
    const result = await run;
    expect(result.reply).toBe("Let me look.\n\nThe code is 4242.");
    expect(result.toolCalls).toHaveLength(1);
    expect(result.toolCalls[0]).toMatchObject({ name: "read_file", success: true, attempts: 1, arguments: { path: "notes.txt" } });
    expect(result.toolCalls[0]!.result).toContain("4242");
    const second = model.requests[1]!.messages;
    expect(second.at(-1)).toMatchObject({ role: "tool", name: "read_file", content: "the launch code is 4242\n" });
    expect(second.at(-2)).toMatchObject({ role: "assistant", toolCalls: [{ name: "read_file" }] });
    expect(model.requests[0]!.tools?.map((tool) => tool.name)).toEqual(["read_file", "list_dir"]);
    expect(events.map((event) => event.type)).toContain("tool-start");
    expect(events.map((event) => event.type)).toContain("tool-result");
    expectPaired(result.transcript);
  });

  it("stops at maxIterations with the note, every call paired", async () => {
    const { run, model } = turn(() => ({ toolCalls: [{ name: "list_dir", arguments: {} }] }), { maxIterations: 3 });
    const result = await run;
    expect(result.stopReason).toBe("max-iterations");
    expect(result.iterations).toBe(3);
    expect(model.requests).toHaveLength(3);
    expect(result.toolCalls).toHaveLength(3);
    expect(result.reply.endsWith(limitNote(3))).toBe(true);
    expectPaired(result.transcript);
  });

  it("caps the total tool calls even within one response", async () => {
    const many = Array.from({ length: 5 }, () => ({ name: "list_dir", arguments: {} }));
    const { run } = turn([{ toolCalls: many }, { text: "never asked" }], { maxIterations: 3 });
    const result = await run;
    expect(result.toolCalls).toHaveLength(3);
    expect(result.stopReason).toBe("max-iterations");
    expect(result.reply).toContain(limitNote(3));
    const skipped = result.transcript.filter((message) => message.role === "tool" && message.content.includes("limit of 3 tool calls"));
    expect(skipped).toHaveLength(2);
    expectPaired(result.transcript);
  });

  it("does not call the model when cancelled before the first iteration", async () => {
    const controller = new AbortController();
    controller.abort();
    const { run, model } = turn([{ text: "never" }], { signal: controller.signal });
    const result = await run;
    expect(result.stopReason).toBe("cancelled");
    expect(model.requests).toHaveLength(0);
  });

  it("aborts the model stream when cancelled mid-stream and keeps what was said", async () => {
    const controller = new AbortController();
    const { run } = turn([{ text: "Thinking about it", hang: true }], {
      signal: controller.signal,
      listener: (event) => {
        if (event.type === "delta") setTimeout(() => controller.abort(), 0);
      },
    });
    const result = await run;
    expect(result.stopReason).toBe("cancelled");
    expect(result.reply).toBe("Thinking about it\n\n[stopped]");
  });

  it("checks cancellation before each tool call and still pairs the skipped ones", async () => {
    const controller = new AbortController();
    const { run } = turn(
      [{ toolCalls: [{ name: "list_dir", arguments: {} }, { name: "read_file", arguments: { path: "notes.txt" } }] }, { text: "never" }],
      {
        signal: controller.signal,
        listener: (event) => {
          if (event.type === "tool-result") controller.abort();
        },
      },
    );
    const result = await run;
    expect(result.stopReason).toBe("cancelled");
    expect(result.toolCalls.map((call) => call.name)).toEqual(["list_dir"]);
    expectPaired(result.transcript);
  });

  it("retries a tool that throws, waiting retryDelay between attempts", async () => {
    let calls = 0;
    const flaky = defineTool({
      name: "flaky",
      description: "fails twice",
      parameters: z.object({}),
      async execute() {
        calls += 1;
        if (calls < 3) throw new Error(`network blip ${calls}`);
        return "worked";
      },
    });
    const { run, sleeps } = turn([{ toolCalls: [{ name: "flaky", arguments: {} }] }, { text: "done" }], { tools: registry(flaky) });
    const result = await run;
    expect(result.toolCalls[0]).toMatchObject({ success: true, attempts: 3, result: "worked" });
    expect(sleeps).toEqual([1000, 1000]);
  });

  it("gives up after maxRetries and hands the error to the model", async () => {
    const broken = defineTool({
      name: "broken",
      description: "always fails",
      parameters: z.object({}),
      async execute() {
        throw new Error("disk on fire");
      },
    });
    const { run, model } = turn([{ toolCalls: [{ name: "broken", arguments: {} }] }, { text: "sorry" }], { tools: registry(broken) });
    const result = await run;
    expect(result.toolCalls[0]).toMatchObject({ success: false, attempts: 3 });
    expect(model.requests[1]!.messages.at(-1)).toMatchObject({ role: "tool", content: expect.stringContaining("disk on fire") });
  });

  it("does not retry a ToolError: it is the model's to fix", async () => {
    let calls = 0;
    const picky = defineTool({
      name: "picky",
      description: "refuses",
      parameters: z.object({}),
      async execute() {
        calls += 1;
        throw new ToolError("the widget is locked", "Unlock it first.");
      },
    });
    const { run } = turn([{ toolCalls: [{ name: "picky", arguments: {} }] }, { text: "ok" }], { tools: registry(picky) });
    const result = await run;
    expect(calls).toBe(1);
    expect(result.toolCalls[0]!.result).toBe("Error: the widget is locked. Next: Unlock it first.");
  });

  it("answers malformed tool-call JSON with the parse error as that call's result", async () => {
    const { run, model } = turn([{ toolCalls: [{ id: "bad", name: "read_file", arguments: '{"path": "notes.txt"' }] }, { text: "retrying" }]);
    const result = await run;
    const answer = model.requests[1]!.messages.at(-1);
    expect(answer).toMatchObject({ role: "tool", toolCallId: "bad", content: expect.stringMatching(/^Error: the arguments of read_file are not valid JSON/) });
    expect(result.toolCalls[0]!.success).toBe(false);
    expectPaired(result.transcript);
  });

  it("names the field when arguments fail validation, and forgives null and JSON-in-a-string", async () => {
    const { run, model } = turn([
      { toolCalls: [{ name: "read_file", arguments: { path: 42 } }] },
      { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt", offset: null, limit: null } }] },
      { text: "ok" },
    ]);
    const result = await run;
    expect(model.requests[1]!.messages.at(-1)).toMatchObject({ content: expect.stringContaining("`path`: expected string") });
    expect(result.toolCalls[1]).toMatchObject({ success: true });
  });

  it("reports a model failure as an error turn with a reply that says so", async () => {
    const { run, events } = turn([{ error: new ProviderError("upstream exploded", { kind: "server", status: 500 }) }]);
    const result = await run;
    expect(result.stopReason).toBe("error");
    expect(result.reply).toContain("upstream exploded");
    expect(events.some((event) => event.type === "error")).toBe(true);
  });

  it("keeps reasoning on the assistant message so it can be sent back", async () => {
    const { run, model } = turn([
      { reasoning: "I should read the file", toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] },
      { text: "4242" },
    ]);
    await run;
    expect(model.requests[1]!.messages.find((message) => message.role === "assistant")).toMatchObject({
      reasoning: [{ text: "I should read the file" }],
    });
  });

  it("survives a listener that throws", async () => {
    const { run } = turn([{ text: "fine" }], {
      listener: () => {
        throw new Error("listener bug");
      },
    });
    expect((await run).reply).toBe("fine");
  });

  it("sums token usage over the turn's model calls", async () => {
    const { run } = turn([
      { toolCalls: [{ name: "list_dir", arguments: {} }], usage: { inputTokens: 100, outputTokens: 7 } },
      { text: "ok", usage: { inputTokens: 150, outputTokens: 3 } },
    ]);
    expect((await run).usage).toEqual({ inputTokens: 250, outputTokens: 10 });
  });
});
