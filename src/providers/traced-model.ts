/**
 * A ChatModel whose every call (one stream, its retries and fallbacks included) is a span after
 * the OpenTelemetry GenAI conventions: `chat <model>`, with the provider, the model asked and the
 * one that answered, the finish reason and the token usage. Neither the prompt nor the reply is
 * recorded. The span is not made active: parts are handed to the caller in the caller's context.
 */
import { SpanKind, failSpan, startSpan } from "../tracing.js";
import type { ChatModel, StreamPart } from "./chat-model.js";

export function traceModel(model: ChatModel): ChatModel {
  const separator = model.id.indexOf("/");
  const provider = separator > 0 ? model.id.slice(0, separator) : model.id;
  const name = separator > 0 ? model.id.slice(separator + 1) : model.id;
  return {
    id: model.id,
    async *stream(request) {
      const span = startSpan(`chat ${name}`, {
        kind: SpanKind.CLIENT,
        attributes: {
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": provider,
          "gen_ai.request.model": name,
          "gen_ai.request.stream": true,
          ...(request.maxTokens === undefined ? {} : { "gen_ai.request.max_tokens": request.maxTokens }),
          ...(request.temperature === undefined ? {} : { "gen_ai.request.temperature": request.temperature }),
          "countbot.tools_offered": request.tools?.length ?? 0,
        },
      });
      let toolCalls = 0;
      try {
        for await (const part of model.stream(request)) {
          if (part.type === "tool-call") toolCalls += 1;
          else if (part.type === "finish") span.setAttributes(finishAttributes(part));
          yield part;
        }
        span.setAttribute("countbot.tool_calls", toolCalls);
      } catch (error) {
        failSpan(span, error);
        throw error;
      } finally {
        span.end();
      }
    },
  };
}

function finishAttributes(part: Extract<StreamPart, { type: "finish" }>): Record<string, number | string | string[]> {
  const { usage } = part;
  return {
    "gen_ai.response.model": part.model,
    "gen_ai.response.finish_reasons": [part.reason],
    "gen_ai.usage.input_tokens": usage.inputTokens,
    "gen_ai.usage.output_tokens": usage.outputTokens,
    ...(usage.cachedInputTokens === undefined ? {} : { "gen_ai.usage.cache_read.input_tokens": usage.cachedInputTokens }),
    ...(usage.reasoningTokens === undefined ? {} : { "countbot.usage.reasoning_tokens": usage.reasoningTokens }),
  };
}
