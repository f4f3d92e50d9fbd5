/**
 * An LlmProvider for the OpenAI Chat Completions API and the many servers that copy it
 * (DeepSeek, GLM, Qwen, Moonshot, OpenRouter, Ollama, vLLM).
 */
import OpenAI from "openai";
import type {
  ChatCompletionChunk,
  ChatCompletionContentPart,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionAssistantMessageParam,
  ChatCompletionTool,
} from "openai/resources/chat/completions";
import type { CompletionUsage } from "openai/resources/completions";
import { ProviderError } from "../errors.js";
import { createConnectionPool } from "./connection-pool.js";
import { DEFAULT_DEADLINE_MS, startIdleTimer } from "./idle-timer.js";
import { postForEvents, SDK_HEADERS } from "./sse-post.js";
import { toProviderError, type ErrorContext, type SdkErrorClasses } from "./sdk-errors.js";
import { type ContentPiece, ThinkTagSplitter } from "./think-tags.js";
import type {
  ChatMessage,
  ChatRequest,
  FinishReason,
  ImageContentPart,
  LlmProvider,
  StreamPart,
  TextContentPart,
  ToolDefinition,
  Usage,
} from "./chat-model.js";

export interface OpenAICompatibleProviderOptions {
  /** The provider's name in config, e.g. `openai`, `deepseek`. */
  name: string;
  /** Leave unset for servers that need none (Ollama, vLLM): then no Authorization header is sent. */
  apiKey?: string;
  /**
   * Base URL ending in the API version, e.g. `https://api.deepseek.com/v1`. Required: the SDK's own
   * default reads `OPENAI_BASE_URL` and would send this provider's key wherever that points.
   */
  baseURL: string;
  /** Extra HTTP headers sent with every request. */
  headers?: Record<string, string>;
  /** Longest wait for the response to start and longest silence (no content) inside a stream. Default 120 000. */
  timeoutMs?: number;
  /** Longest one request may take in all, however lively its stream. Default 600 000. */
  deadlineMs?: number;
  /**
   * Which body field carries `maxTokens`. Default `max_tokens`: OpenAI deprecated it for
   * `max_completion_tokens`, but most compatible servers (older vLLM, Ollama, several hosted
   * Chinese APIs) reject or ignore the newer name, while api.openai.com's reasoning models reject
   * the old one; the factory picks `max_completion_tokens` for api.openai.com only.
   */
  maxTokensField?: "max_tokens" | "max_completion_tokens";
  fetch?: typeof fetch;
  /** Clock for Retry-After dates. */
  now?: () => number;
}

const openAIErrors: SdkErrorClasses = OpenAI;

// Fields that compatible servers add to the wire format and the SDK types leave out.
type ReasoningDelta = ChatCompletionChunk.Choice.Delta & { reasoning_content?: string | null; reasoning?: string | null };
type AssistantWithReasoning = ChatCompletionAssistantMessageParam & { reasoning_content?: string };
/** Where compatible servers report prompt-cache hits: OpenAI, Qwen, GLM, OpenRouter in `prompt_tokens_details`, DeepSeek also in `prompt_cache_hit_tokens`, Moonshot in `cached_tokens`. */
type UsageWithCacheFields = CompletionUsage & { prompt_cache_hit_tokens?: number; cached_tokens?: number };
/** Moonshot sends the usage inside the last choice rather than beside it. */
type ChoiceWithUsage = ChatCompletionChunk.Choice & { usage?: UsageWithCacheFields | null };

export function createOpenAICompatibleProvider(options: OpenAICompatibleProviderOptions): LlmProvider {
  const timeoutMs = options.timeoutMs ?? 120_000;
  const deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  const now = options.now ?? Date.now;
  const maxTokensField = options.maxTokensField ?? "max_tokens";
  // The SDK's chat request without its client (./sse-post.ts): its headers and the key's
  // Authorization, the configured headers over them whatever their case.
  const url = `${options.baseURL.replace(/\/+$/, "")}/chat/completions`;
  const headers: Record<string, string> = { ...SDK_HEADERS, ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) };
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value;
  // Connections kept alive between calls, in a pool of this provider's own (a fetch given for tests
  // or a proxy is used as it is).
  const fetchImpl = options.fetch ?? createConnectionPool().fetch;

  async function* stream(request: ChatRequest): AsyncGenerator<StreamPart> {
    const model = `${options.name}/${request.model}`;
    const timer = startIdleTimer(timeoutMs, request.signal, deadlineMs);
    const context: ErrorContext = { model, phase: "request", signal: request.signal, timer, now };
    try {
      const body = requestBody({
        model: request.model,
        messages: toOpenAIMessages(request.messages),
        stream: true,
        stream_options: { include_usage: true },
        ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
        ...(request.maxTokens !== undefined ? { [maxTokensField]: request.maxTokens } : {}),
      }, request.tools);
      let chunks: AsyncIterable<ChatCompletionChunk>;
      try {
        chunks = (await postForEvents(fetchImpl, { url, headers, body, signal: timer.signal })) as AsyncIterable<ChatCompletionChunk>;
      } catch (error) {
        throw toProviderError(error, openAIErrors, context);
      }
      context.phase = "stream";
      const reader = createChunkReader(model);
      try {
        for await (const chunk of chunks) {
          const parts = reader.read(chunk);
          // Only content is progress: a server dripping empty keep-alive chunks stays silent.
          if (parts.length === 0 && !carriesProgress(chunk)) continue;
          // The consumer's own pace must not count as server silence.
          timer.stop();
          for (const part of parts) yield part;
          timer.touch();
        }
      } catch (error) {
        throw toProviderError(error, openAIErrors, context);
      }
      // A body cut by an abort may also just end (a fetch given in options decides).
      if (request.signal?.aborted || timer.expired) throw toProviderError(new Error("aborted"), openAIErrors, context);
      yield* reader.end();
    } finally {
      timer.dispose();
    }
  }

  return { name: options.name, stream };
}

/** Whether a chunk brought anything but air: tool-call pieces, a finish or usage (text and reasoning show up as parts). */
function carriesProgress(chunk: ChatCompletionChunk): boolean {
  if (chunk.usage) return true;
  const choice = chunk.choices?.[0];
  if (!choice) return false;
  if (choice.finish_reason) return true;
  return (choice.delta?.tool_calls ?? []).some((call) => Boolean(call.id || call.function?.name || call.function?.arguments));
}

interface PendingToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * Turns chunks into parts; tool calls and the finish wait for the end of the stream. Reasoning is
 * read from `reasoning_content` (DeepSeek, Qwen, Kimi, GLM), `reasoning` (OpenRouter, Ollama, vLLM)
 * and a `<think>` block opening the content (servers without a reasoning parser): never answer text.
 */
function createChunkReader(model: string) {
  const content = new ThinkTagSplitter();
  const toolCalls: PendingToolCall[] = [];
  const toolCallsByIndex = new Map<number, PendingToolCall>();
  let reasoning = ""; // the open reasoning block
  let finishReason: string | undefined;
  let usage: Usage = { inputTokens: 0, outputTokens: 0 };

  // Reasoning comes before the answer: once text (or the end) arrives, the reasoning block is complete.
  function closeReasoning(): StreamPart[] {
    if (!reasoning) return [];
    const block: StreamPart = { type: "reasoning-block", block: { text: reasoning } };
    reasoning = "";
    return [block];
  }

  function contentParts(pieces: ContentPiece[]): StreamPart[] {
    return pieces.flatMap((piece): StreamPart[] => {
      if (piece.kind === "text") return [...closeReasoning(), { type: "text-delta", text: piece.text }];
      reasoning += piece.text;
      return [{ type: "reasoning-delta", text: piece.text }];
    });
  }

  return {
    read(chunk: ChatCompletionChunk): StreamPart[] {
      const parts: StreamPart[] = [];
      if (chunk.usage) usage = toUsage(chunk.usage);
      const choice: ChoiceWithUsage | undefined = chunk.choices?.[0];
      if (!choice) return parts;
      if (choice.usage && !chunk.usage) usage = toUsage(choice.usage);
      const delta = (choice.delta ?? {}) as ReasoningDelta;
      const reasoningText = delta.reasoning_content || delta.reasoning;
      if (reasoningText) parts.push(...contentParts([{ kind: "reasoning", text: reasoningText }]));
      if (delta.content) parts.push(...contentParts(content.push(delta.content)));
      for (const toolCallDelta of delta.tool_calls ?? []) {
        let call = toolCallsByIndex.get(toolCallDelta.index);
        // Some servers number every call 0 and tell them apart only by a new id.
        if (!call || (toolCallDelta.id && call.id && toolCallDelta.id !== call.id)) {
          call = { id: toolCallDelta.id ?? "", name: "", arguments: "" };
          toolCalls.push(call);
          toolCallsByIndex.set(toolCallDelta.index, call);
        }
        if (toolCallDelta.id && !call.id) call.id = toolCallDelta.id;
        // Some servers repeat the name in every chunk: keep the first.
        if (toolCallDelta.function?.name && !call.name) call.name = toolCallDelta.function.name;
        if (toolCallDelta.function?.arguments) call.arguments += toolCallDelta.function.arguments;
      }
      if (choice.finish_reason) finishReason = choice.finish_reason;
      return parts;
    },

    end(): StreamPart[] {
      // The SDK hides `[DONE]`, so the finish reason is the only proof the answer is whole.
      if (!finishReason) {
        throw new ProviderError(`${model}: the stream ended before the model finished its answer`, { kind: "stream", model });
      }
      const parts: StreamPart[] = [...contentParts(content.end()), ...closeReasoning()];
      toolCalls.forEach((call, position) => {
        parts.push({
          type: "tool-call",
          call: { id: call.id || `call_${position}`, name: call.name, arguments: call.arguments || "{}" },
        });
      });
      parts.push({ type: "finish", reason: toFinishReason(finishReason, toolCalls.length > 0), usage, model });
      return parts;
    },
  };
}

function toFinishReason(reason: string, hasToolCalls: boolean): FinishReason {
  // Ollama and some vLLM builds say `stop` even when the answer is tool calls.
  if (hasToolCalls && (reason === "stop" || reason === "tool_calls" || reason === "function_call")) return "tool-calls";
  switch (reason) {
    case "stop":
      return "stop";
    case "tool_calls":
    case "function_call":
      return "tool-calls";
    case "length":
      return "length";
    case "content_filter":
      return "content-filter";
    default:
      return "other";
  }
}

function toUsage(usage: UsageWithCacheFields): Usage {
  const result: Usage = { inputTokens: usage.prompt_tokens ?? 0, outputTokens: usage.completion_tokens ?? 0 };
  // The largest of the fields a server filled (some send `cached_tokens: 0` beside their own field).
  const reported = [usage.prompt_tokens_details?.cached_tokens, usage.prompt_cache_hit_tokens, usage.cached_tokens].filter((value): value is number => typeof value === "number");
  if (reported.length > 0) result.cachedInputTokens = Math.max(...reported);
  const reasoning = usage.completion_tokens_details?.reasoning_tokens;
  if (reasoning !== undefined) result.reasoningTokens = reasoning;
  return result;
}

export function toOpenAIMessages(messages: ChatMessage[]): ChatCompletionMessageParam[] {
  return messages.map((message): ChatCompletionMessageParam => {
    switch (message.role) {
      case "system":
        return { role: "system", content: message.content };
      case "user":
        return {
          role: "user",
          content: typeof message.content === "string" ? message.content : message.content.map(toContentPart),
        };
      case "assistant": {
        const toolCalls = message.toolCalls ?? [];
        const assistant: AssistantWithReasoning = {
          role: "assistant",
          // OpenAI wants null, not "", beside tool calls.
          content: message.content || (toolCalls.length ? null : ""),
        };
        if (toolCalls.length) {
          assistant.tool_calls = toolCalls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          }));
        }
        // DeepSeek (thinking with tools) and GLM require the reasoning of earlier turns back.
        const reasoning = message.reasoning
          ?.map((block) => block.text)
          .filter(Boolean)
          .join("\n");
        if (reasoning) assistant.reasoning_content = reasoning;
        return assistant;
      }
      case "tool":
        return { role: "tool", tool_call_id: message.toolCallId, content: message.content };
    }
  });
}

function toContentPart(part: TextContentPart | ImageContentPart): ChatCompletionContentPart {
  if (part.type === "text") return { type: "text", text: part.text };
  return { type: "image_url", image_url: { url: `data:${part.mediaType};base64,${part.data}` } };
}

function toOpenAITool(tool: ToolDefinition): ChatCompletionTool {
  return { type: "function", function: { name: tool.name, description: tool.description, parameters: tool.parameters } };
}

/**
 * A tool list's JSON, by the list, with the definitions it was made of: a registry hands out one
 * list until its tools change, and the tools are most of a request (7 of 11 KB with the defaults).
 */
const toolListJson = new WeakMap<ToolDefinition[], { made: ToolDefinition[]; json: string }>();

/** The request's JSON text: the fields as JSON.stringify writes them, then the tools' JSON. */
function requestBody(fields: Omit<ChatCompletionCreateParamsStreaming, "tools">, tools: ToolDefinition[] | undefined): string {
  const json = JSON.stringify(fields);
  if (!tools?.length) return json;
  return `${json.slice(0, -1)},"tools":${toolsJson(tools)}}`;
}

function toolsJson(tools: ToolDefinition[]): string {
  const known = toolListJson.get(tools);
  // The same list, still holding the same definitions (a list changed in place is made again).
  if (known && known.made.length === tools.length && known.made.every((tool, index) => tool === tools[index])) return known.json;
  const json = JSON.stringify(tools.map(toOpenAITool));
  toolListJson.set(tools, { made: [...tools], json });
  return json;
}
