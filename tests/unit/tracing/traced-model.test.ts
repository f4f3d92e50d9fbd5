/** A model call's span: GenAI attributes with the token usage, never the prompt; a failed call is an error span. */
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ProviderError } from "../../../src/errors.js";
import type { ChatModel, StreamPart } from "../../../src/providers/chat-model.js";
import { traceModel } from "../../../src/providers/traced-model.js";
import { type TestTracing, installTestTracing } from "../../support/tracing.js";

let tracing: TestTracing;
beforeEach(() => {
  tracing = installTestTracing();
});
afterEach(async () => {
  await tracing.uninstall();
});

function model(parts: StreamPart[], failure?: Error): ChatModel {
  return {
    id: "deepseek/deepseek-chat",
    async *stream() {
      for (const part of parts) yield part;
      if (failure) throw failure;
    },
  };
}

async function drain(chat: ChatModel): Promise<void> {
  for await (const part of chat.stream({ messages: [{ role: "user", content: "the secret plan" }], maxTokens: 50, temperature: 0.2, tools: [] })) void part;
}

describe("traced model", () => {
  it("records provider, models, finish reason and token usage, and nothing of the prompt", async () => {
    await drain(
      traceModel(
        model([
          { type: "text-delta", text: "ok" },
          { type: "tool-call", call: { id: "1", name: "read_file", arguments: "{}" } },
          { type: "finish", reason: "tool-calls", usage: { inputTokens: 30, outputTokens: 4, cachedInputTokens: 10 }, model: "deepseek-chat-v3" },
        ]),
      ),
    );
    const [span] = tracing.named("chat deepseek-chat");
    expect(span!.kind).toBe(SpanKind.CLIENT);
    expect(span!.attributes).toEqual({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "deepseek",
      "gen_ai.request.model": "deepseek-chat",
      "gen_ai.request.stream": true,
      "gen_ai.request.max_tokens": 50,
      "gen_ai.request.temperature": 0.2,
      "countbot.tools_offered": 0,
      "gen_ai.response.model": "deepseek-chat-v3",
      "gen_ai.response.finish_reasons": ["tool-calls"],
      "gen_ai.usage.input_tokens": 30,
      "gen_ai.usage.output_tokens": 4,
      "gen_ai.usage.cache_read.input_tokens": 10,
      "countbot.tool_calls": 1,
    });
    expect(JSON.stringify(span!.attributes)).not.toContain("secret");
  });

  it("marks a failed call as an error, and ends the span of a call the caller stopped reading", async () => {
    await expect(drain(traceModel(model([], new ProviderError("rate limited", { kind: "rate-limit" }))))).rejects.toThrow("rate limited");
    const [failed] = tracing.named("chat deepseek-chat");
    expect(failed!.status).toEqual({ code: SpanStatusCode.ERROR, message: "rate limited" });
    expect(failed!.events.map((event) => event.name)).toEqual(["exception"]);

    tracing.reset();
    for await (const part of traceModel(model([{ type: "text-delta", text: "a" }, { type: "text-delta", text: "b" }])).stream({ messages: [] })) {
      if (part.type === "text-delta") break;
    }
    expect(tracing.named("chat deepseek-chat")).toHaveLength(1);
  });
});
