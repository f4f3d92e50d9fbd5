/**
 * A scripted fake of the Anthropic Messages API (`POST /v1/messages`), streaming the SSE events in
 * the order and shape Anthropic sends them, or a JSON message when `stream` is off.
 *
 * ```ts
 * const server = await startFakeAnthropic({ script: [{ thinking: { text: "hmm", signature: "sig" }, text: "Hi" }] });
 * new Anthropic({ baseURL: server.url, apiKey: "test" });
 * ```
 */
import type { ServerResponse } from "node:http";
import {
  cut,
  sendJson,
  splitText,
  startEventStream,
  startScriptedServer,
  wait,
  write,
  type RecordedRequest,
  type Script,
} from "./scripted-http-server.js";

export type { RecordedRequest } from "./scripted-http-server.js";

export interface FakeAnthropicToolCall {
  /** Default `toolu_<n>`. */
  id?: string;
  name: string;
  /** JSON text, sent as `input_json_delta` split over several events. */
  arguments: string;
}

export interface FakeAnthropicUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadInputTokens?: number;
  cacheCreationInputTokens?: number;
}

export interface FakeAnthropicError {
  /** 429, 529 (overloaded), 500, 401, ... */
  status: number;
  /** Anthropic error type; default from the status (`rate_limit_error`, `overloaded_error`, `api_error`, ...). */
  type?: string;
  message?: string;
  /** `retry-after` header value (seconds or an HTTP date). */
  retryAfter?: string;
}

export interface FakeAnthropicStep {
  /** A thinking block, sent first: `thinking_delta` events then one `signature_delta`. */
  thinking?: { text: string | string[]; signature: string };
  /** A `redacted_thinking` block with this data, after the thinking block. */
  redactedThinking?: string;
  /** The answer; an array gives the exact `text_delta` events. */
  text?: string | string[];
  /** `tool_use` blocks after the text. */
  toolCalls?: FakeAnthropicToolCall[];
  /** Default `tool_use` when there are tool calls, else `end_turn`. */
  stopReason?: string;
  usage?: FakeAnthropicUsage;
  /** Answer with this HTTP error instead. */
  error?: FakeAnthropicError;
  /** An `event: error` after the content blocks instead of `message_delta`, as Anthropic does when overloaded mid-stream. */
  streamError?: { type: string; message?: string };
  /** Drop the connection after this many events (`message_start` and `ping` count). */
  cutAfterChunks?: number;
  /** End the response cleanly after this many events, without `message_delta` or `message_stop`. */
  endAfterChunks?: number;
  /** Wait this long before answering (before the headers). */
  delayMs?: number;
  /** Stall this long after the content blocks, before `message_delta`. */
  hangMs?: number;
}

export interface FakeAnthropicServer {
  /** Base URL without `/v1`, for the SDK's `baseURL`. */
  url: string;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  close(): Promise<void>;
}

type SseEvent = { event: string; data: Record<string, unknown> };

export async function startFakeAnthropic(options: { script: Script<FakeAnthropicStep> }): Promise<FakeAnthropicServer> {
  const server = await startScriptedServer<FakeAnthropicStep>({
    name: "fake-anthropic",
    script: options.script,
    paths: ["/v1/messages"],
    respond,
    sendError: (response, status, message) => sendJson(response, status, errorBody({ status, message })),
  });
  return { url: server.origin, requests: server.requests, close: server.close };
}

async function respond(step: FakeAnthropicStep, request: RecordedRequest, response: ServerResponse): Promise<void> {
  if (step.delayMs && !(await wait(step.delayMs, response))) return;
  if (step.error) {
    const headers: Record<string, string> = step.error.retryAfter !== undefined ? { "retry-after": step.error.retryAfter } : {};
    return sendJson(response, step.error.status, errorBody(step.error), headers);
  }
  const model = String(request.body.model ?? "claude-fake");
  if (request.body.stream === true) return streamAnswer(step, model, response);
  if (step.hangMs && !(await wait(step.hangMs, response))) return;
  sendJson(response, 200, message(step, model));
}

function errorBody(error: FakeAnthropicError) {
  return { type: "error", error: { type: error.type ?? defaultErrorType(error.status), message: error.message ?? `fake error ${error.status}` } };
}

function defaultErrorType(status: number): string {
  const types: Record<number, string> = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
  };
  return types[status] ?? (status >= 500 ? "api_error" : "invalid_request_error");
}

function contentBlocks(step: FakeAnthropicStep): SseEvent[][] {
  const blocks: SseEvent[][] = [];
  const block = (index: number, start: Record<string, unknown>, deltas: Record<string, unknown>[]): SseEvent[] => [
    { event: "content_block_start", data: { type: "content_block_start", index, content_block: start } },
    ...deltas.map((delta) => ({ event: "content_block_delta", data: { type: "content_block_delta", index, delta } })),
    { event: "content_block_stop", data: { type: "content_block_stop", index } },
  ];
  if (step.thinking) {
    const deltas: Record<string, unknown>[] = pieces(step.thinking.text).map((thinking) => ({ type: "thinking_delta", thinking }));
    deltas.push({ type: "signature_delta", signature: step.thinking.signature });
    blocks.push(block(blocks.length, { type: "thinking", thinking: "", signature: "" }, deltas));
  }
  if (step.redactedThinking !== undefined) {
    blocks.push(block(blocks.length, { type: "redacted_thinking", data: step.redactedThinking }, []));
  }
  if (step.text !== undefined) {
    const deltas = pieces(step.text).map((text) => ({ type: "text_delta", text }));
    blocks.push(block(blocks.length, { type: "text", text: "", citations: null }, deltas));
  }
  (step.toolCalls ?? []).forEach((call, position) => {
    // Anthropic opens every tool input with an empty delta.
    const deltas = ["", ...splitText(call.arguments, 3)].map((partial_json) => ({ type: "input_json_delta", partial_json }));
    const start = { type: "tool_use", id: call.id ?? `toolu_${position}`, name: call.name, input: {}, caller: { type: "direct" } };
    blocks.push(block(blocks.length, start, deltas));
  });
  return blocks;
}

async function streamAnswer(step: FakeAnthropicStep, model: string, response: ServerResponse): Promise<void> {
  const usage = step.usage ?? { inputTokens: 10, outputTokens: 5 };
  const head: SseEvent[] = [
    {
      event: "message_start",
      data: {
        type: "message_start",
        message: {
          id: "msg_fake",
          type: "message",
          role: "assistant",
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: {
            input_tokens: usage.inputTokens,
            output_tokens: 1,
            cache_read_input_tokens: usage.cacheReadInputTokens ?? 0,
            cache_creation_input_tokens: usage.cacheCreationInputTokens ?? 0,
          },
        },
      },
    },
    { event: "ping", data: { type: "ping" } },
  ];
  const content = contentBlocks(step).flat();
  const stopReason = step.stopReason ?? (step.toolCalls?.length ? "tool_use" : "end_turn");
  const ending: SseEvent[] = step.streamError
    ? [{ event: "error", data: { type: "error", error: { type: step.streamError.type, message: step.streamError.message ?? "Overloaded" } } }]
    : [
        {
          event: "message_delta",
          data: { type: "message_delta", delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: usage.outputTokens } },
        },
        { event: "message_stop", data: { type: "message_stop" } },
      ];

  startEventStream(response, { "request-id": "req_fake" });
  let sent = 0;
  const send = async (event: SseEvent): Promise<boolean> => {
    if (step.cutAfterChunks !== undefined && sent >= step.cutAfterChunks) {
      await cut(response);
      return false;
    }
    if (step.endAfterChunks !== undefined && sent >= step.endAfterChunks) {
      response.end();
      return false;
    }
    await write(response, `event: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`);
    sent += 1;
    return !response.destroyed;
  };
  for (const event of [...head, ...content]) if (!(await send(event))) return;
  if (step.hangMs && !(await wait(step.hangMs, response))) return;
  for (const event of ending) if (!(await send(event))) return;
  response.end();
}

function message(step: FakeAnthropicStep, model: string) {
  const content: Record<string, unknown>[] = [];
  if (step.thinking) content.push({ type: "thinking", thinking: pieces(step.thinking.text).join(""), signature: step.thinking.signature });
  if (step.redactedThinking !== undefined) content.push({ type: "redacted_thinking", data: step.redactedThinking });
  if (step.text !== undefined) content.push({ type: "text", text: pieces(step.text).join(""), citations: null });
  (step.toolCalls ?? []).forEach((call, position) => {
    content.push({ type: "tool_use", id: call.id ?? `toolu_${position}`, name: call.name, input: JSON.parse(call.arguments) as unknown });
  });
  const usage = step.usage ?? { inputTokens: 10, outputTokens: 5 };
  return {
    id: "msg_fake",
    type: "message",
    role: "assistant",
    model,
    content,
    stop_reason: step.stopReason ?? (step.toolCalls?.length ? "tool_use" : "end_turn"),
    stop_sequence: null,
    usage: { input_tokens: usage.inputTokens, output_tokens: usage.outputTokens },
  };
}

function pieces(value: string | string[]): string[] {
  return typeof value === "string" ? [value] : value;
}
