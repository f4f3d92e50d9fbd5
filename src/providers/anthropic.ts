/**
 * An LlmProvider for the Anthropic Messages API.
 */
import Anthropic from "@anthropic-ai/sdk";
import type {
  Base64ImageSource,
  ContentBlockParam,
  MessageCreateParamsStreaming,
  MessageParam,
  RawMessageStreamEvent,
  TextBlockParam,
  Tool,
} from "@anthropic-ai/sdk/resources/messages";
import { ProviderError } from "../errors.js";
import { createConnectionPool } from "./connection-pool.js";
import { DEFAULT_DEADLINE_MS, startIdleTimer } from "./idle-timer.js";
import { toProviderError, type ErrorContext, type SdkErrorClasses } from "./sdk-errors.js";
import type { ChatMessage, ChatRequest, FinishReason, LlmProvider, StreamPart, ToolDefinition, Usage } from "./chat-model.js";

export interface AnthropicProviderOptions {
  /** The provider's name in config; default `anthropic`. */
  name?: string;
  apiKey?: string;
  /** Without `/v1`; default `https://api.anthropic.com`. Set explicitly so the SDK never reads ANTHROPIC_BASE_URL itself. */
  baseURL?: string;
  /** Extra HTTP headers sent with every request. */
  headers?: Record<string, string>;
  /** Longest wait for the response to start and longest silence (no content) inside a stream. Default 120 000. */
  timeoutMs?: number;
  /** Longest one request may take in all, however lively its stream. Default 600 000. */
  deadlineMs?: number;
  /** Output limit when a request sets none: the Messages API requires one. Default 4096. */
  defaultMaxTokens?: number;
  fetch?: typeof fetch;
  /** Clock for Retry-After dates. */
  now?: () => number;
}

const anthropicErrors: SdkErrorClasses = Anthropic;

/** Whether an event that produced no part still moved the answer on (an empty delta does not; the SDK drops `ping`s itself). */
function carriesProgress(event: RawMessageStreamEvent): boolean {
  if (event.type !== "content_block_delta") return true;
  const delta = event.delta as { text?: string; partial_json?: string; thinking?: string; signature?: string };
  return Boolean(delta.text || delta.partial_json || delta.thinking || delta.signature);
}

export function createAnthropicProvider(options: AnthropicProviderOptions): LlmProvider {
  const name = options.name ?? "anthropic";
  const timeoutMs = options.timeoutMs ?? 120_000;
  const now = options.now ?? Date.now;
  const client = new Anthropic({
    // An explicit key also stops the SDK from looking for credentials in the environment and profile files.
    apiKey: options.apiKey ?? "unused",
    baseURL: options.baseURL ?? "https://api.anthropic.com",
    timeout: timeoutMs,
    maxRetries: 0, // retries and fallback are decided in resilient-model.ts, where output already sent is known
    defaultHeaders: { ...(options.apiKey ? {} : { Authorization: null }), ...options.headers },
    // Connections kept alive between calls, in a pool of this provider's own. A whole fetch over it:
    // this SDK's response handling (middleware, clone) wants a whole fetch Response.
    fetch: options.fetch ?? createConnectionPool().wholeFetch,
  });

  async function* stream(request: ChatRequest): AsyncGenerator<StreamPart> {
    const model = `${name}/${request.model}`;
    const timer = startIdleTimer(timeoutMs, request.signal, options.deadlineMs ?? DEFAULT_DEADLINE_MS);
    const context: ErrorContext = { model, phase: "request", signal: request.signal, timer, now };
    try {
      const { system, messages } = toAnthropicMessages(request.messages);
      // No `temperature`: API version 2026-10-21, which this SDK speaks, removed it from the Messages API.
      const body: MessageCreateParamsStreaming = {
        model: request.model,
        max_tokens: request.maxTokens ?? options.defaultMaxTokens ?? 4096,
        messages,
        stream: true,
        ...(system ? { system } : {}),
        ...(request.tools?.length ? { tools: request.tools.map(toAnthropicTool) } : {}),
      };
      let events: AsyncIterable<RawMessageStreamEvent>;
      try {
        events = await client.messages.create(body, { signal: timer.signal });
      } catch (error) {
        throw toProviderError(error, anthropicErrors, context);
      }
      context.phase = "stream";
      const reader = createEventReader(model);
      try {
        for await (const event of events) {
          const parts = reader.read(event);
          // Only content is progress: empty deltas leave the silence running.
          if (parts.length === 0 && !carriesProgress(event)) continue;
          // The consumer's own pace must not count as server silence.
          timer.stop();
          for (const part of parts) yield part;
          timer.touch();
        }
      } catch (error) {
        throw toProviderError(error, anthropicErrors, context);
      }
      // On abort the SDK ends the iteration silently instead of throwing.
      if (request.signal?.aborted || timer.expired) throw toProviderError(new Error("aborted"), anthropicErrors, context);
      yield reader.end();
    } finally {
      timer.dispose();
    }
  }

  return { name, stream };
}

type OpenBlock =
  | { type: "text" }
  | { type: "thinking"; text: string; signature: string }
  | { type: "redacted"; data: string }
  | { type: "tool"; id: string; name: string; json: string; input: unknown }
  | { type: "other" };

/** Turns stream events into parts; blocks become reasoning blocks and tool calls when they close. */
function createEventReader(model: string) {
  const blocks = new Map<number, OpenBlock>();
  const usage: Usage = { inputTokens: 0, outputTokens: 0 };
  let stopReason: string | undefined;

  return {
    read(event: RawMessageStreamEvent): StreamPart[] {
      switch (event.type) {
        case "message_start": {
          // Compatible servers (DeepSeek, GLM, Kimi) may leave usage fields out.
          const start: Partial<typeof event.message.usage> = event.message.usage ?? {};
          // Anthropic counts cached input apart; the total matches what OpenAI-style servers report.
          const cached = start.cache_read_input_tokens ?? 0;
          const written = start.cache_creation_input_tokens ?? 0;
          usage.inputTokens = (start.input_tokens ?? 0) + cached + written;
          if (cached) usage.cachedInputTokens = cached;
          if (written) usage.cacheWriteInputTokens = written;
          usage.outputTokens = start.output_tokens ?? 0;
          return [];
        }
        case "content_block_start": {
          const block = event.content_block;
          if (block.type === "text") {
            blocks.set(event.index, { type: "text" });
            return block.text ? [{ type: "text-delta", text: block.text }] : [];
          }
          if (block.type === "thinking") blocks.set(event.index, { type: "thinking", text: block.thinking, signature: block.signature });
          else if (block.type === "redacted_thinking") blocks.set(event.index, { type: "redacted", data: block.data });
          else if (block.type === "tool_use") blocks.set(event.index, { type: "tool", id: block.id, name: block.name, json: "", input: block.input });
          else blocks.set(event.index, { type: "other" });
          return [];
        }
        case "content_block_delta": {
          const block = blocks.get(event.index);
          const delta = event.delta;
          if (delta.type === "text_delta") return [{ type: "text-delta", text: delta.text }];
          if (delta.type === "thinking_delta" && block?.type === "thinking") {
            block.text += delta.thinking;
            return [{ type: "reasoning-delta", text: delta.thinking }];
          }
          if (delta.type === "signature_delta" && block?.type === "thinking") block.signature += delta.signature;
          if (delta.type === "input_json_delta" && block?.type === "tool") block.json += delta.partial_json;
          return [];
        }
        case "content_block_stop": {
          const block = blocks.get(event.index);
          blocks.delete(event.index);
          if (block?.type === "thinking") return [{ type: "reasoning-block", block: { text: block.text, signature: block.signature } }];
          if (block?.type === "redacted") return [{ type: "reasoning-block", block: { text: "", redactedData: block.data } }];
          if (block?.type === "tool") {
            // A tool without parameters streams no JSON at all; its input then sits in the start event.
            const input = block.json || JSON.stringify(block.input ?? {});
            return [{ type: "tool-call", call: { id: block.id, name: block.name, arguments: input } }];
          }
          return [];
        }
        case "message_delta": {
          if (event.delta.stop_reason) stopReason = event.delta.stop_reason;
          const delta: Partial<typeof event.usage> = event.usage ?? {};
          if (delta.output_tokens !== undefined) usage.outputTokens = delta.output_tokens;
          if (delta.input_tokens !== null && delta.input_tokens !== undefined) {
            const cached = delta.cache_read_input_tokens ?? usage.cachedInputTokens ?? 0;
            const written = delta.cache_creation_input_tokens ?? usage.cacheWriteInputTokens ?? 0;
            usage.inputTokens = delta.input_tokens + cached + written;
            if (cached) usage.cachedInputTokens = cached;
            if (written) usage.cacheWriteInputTokens = written;
          }
          const thinking = delta.output_tokens_details?.thinking_tokens;
          if (thinking) usage.reasoningTokens = thinking;
          return [];
        }
        default:
          return [];
      }
    },

    end(): StreamPart {
      if (!stopReason) {
        throw new ProviderError(`${model}: the stream ended before the model finished its answer`, { kind: "stream", model });
      }
      return { type: "finish", reason: toFinishReason(stopReason), usage, model };
    },
  };
}

function toFinishReason(reason: string): FinishReason {
  switch (reason) {
    case "end_turn":
    case "stop_sequence":
      return "stop";
    case "tool_use":
      return "tool-calls";
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length";
    case "refusal":
      return "content-filter";
    default:
      return "other";
  }
}

/**
 * System messages go to `system`, one text block each; tool results become `tool_result` blocks of
 * a user message; and consecutive messages of one role merge, because the API wants user and
 * assistant to alternate.
 *
 * Two prompt-cache breakpoints (`cache_control`): after the first system block (the prompt's
 * stable part: tools and it are read from the cache in every turn of every chat) and on the last
 * block of the last message (the history: the next model call of the turn, and the next turn when
 * nothing before it changed, read it from the cache).
 */
export function toAnthropicMessages(messages: ChatMessage[]): { system?: TextBlockParam[]; messages: MessageParam[] } {
  const system: TextBlockParam[] = [];
  const result: MessageParam[] = [];
  const append = (role: "user" | "assistant", blocks: ContentBlockParam[]) => {
    if (!blocks.length) return; // the API rejects empty content
    const last = result[result.length - 1];
    if (last?.role === role && Array.isArray(last.content)) last.content.push(...blocks);
    else result.push({ role, content: blocks });
  };
  for (const message of messages) {
    switch (message.role) {
      case "system":
        system.push(...systemBlocks(message.content, message.stableLength, system.length === 0));
        break;
      case "user": {
        const parts = typeof message.content === "string" ? [{ type: "text" as const, text: message.content }] : message.content;
        append(
          "user",
          parts.flatMap((part): ContentBlockParam[] => {
            if (part.type === "text") return part.text ? [text(part.text)] : [];
            const source: Base64ImageSource = {
              type: "base64",
              media_type: part.mediaType as Base64ImageSource["media_type"],
              data: part.data,
            };
            return [{ type: "image", source }];
          }),
        );
        break;
      }
      case "tool":
        append("user", [{ type: "tool_result", tool_use_id: message.toolCallId, content: message.content }]);
        break;
      case "assistant": {
        const blocks: ContentBlockParam[] = [];
        // Thinking goes first and verbatim; unsigned reasoning (from another provider) would be rejected.
        for (const block of message.reasoning ?? []) {
          if (block.redactedData) blocks.push({ type: "redacted_thinking", data: block.redactedData });
          else if (block.signature) blocks.push({ type: "thinking", thinking: block.text, signature: block.signature });
        }
        if (message.content) blocks.push(text(message.content));
        for (const call of message.toolCalls ?? []) {
          blocks.push({ type: "tool_use", id: call.id, name: call.name, input: parseToolInput(call.arguments) });
        }
        append("assistant", blocks);
        break;
      }
    }
  }
  markLastBlock(result);
  return { ...(system.length ? { system } : {}), messages: result };
}

const EPHEMERAL = { type: "ephemeral" } as const;

/** A system message as text blocks: its stable part (with the breakpoint when it is the first) and the rest. */
function systemBlocks(content: string, stableLength: number | undefined, first: boolean): TextBlockParam[] {
  const stable = stableLength === undefined ? content : content.slice(0, stableLength);
  const rest = stableLength === undefined ? "" : content.slice(stableLength).replace(/^\s+/, "");
  const blocks: TextBlockParam[] = [];
  if (stable !== "") blocks.push(first ? { ...text(stable), cache_control: EPHEMERAL } : text(stable));
  if (rest !== "") blocks.push(text(rest));
  return blocks;
}

/** A breakpoint on the last message's last block that may carry one (thinking blocks may not). */
function markLastBlock(messages: MessageParam[]): void {
  const content = messages.at(-1)?.content;
  if (!Array.isArray(content)) return;
  for (let index = content.length - 1; index >= 0; index -= 1) {
    const block = content[index]!;
    if (block.type === "thinking" || block.type === "redacted_thinking") continue;
    content[index] = { ...block, cache_control: EPHEMERAL } as ContentBlockParam;
    return;
  }
}

function text(value: string): TextBlockParam {
  return { type: "text", text: value };
}

// The model may have produced broken JSON; the API wants an object, and the tool result already told the model.
function parseToolInput(argumentsText: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(argumentsText);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function toAnthropicTool(tool: ToolDefinition): Tool {
  return { name: tool.name, description: tool.description, input_schema: { ...tool.parameters, type: "object" } };
}
