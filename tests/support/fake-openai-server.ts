/**
 * A scripted fake of the OpenAI Chat Completions API (`POST /v1/chat/completions`), streaming SSE
 * chunks in the shape OpenAI and DeepSeek send them, or a JSON completion when `stream` is off; and,
 * given `transcriptions`, of speech to text (`POST /v1/audio/transcriptions`, fake-transcription.ts).
 *
 * ```ts
 * const server = await startFakeOpenAI({ script: [{ text: ["Hel", "lo"] }, { error: { status: 500 } }] });
 * new OpenAI({ baseURL: server.url, apiKey: "test" });
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

import { type RecordedTranscription, type TranscriptionScript, transcriptionRoute } from "./fake-transcription.js";

export type { RecordedRequest } from "./scripted-http-server.js";
export type { FakeTranscriptionStep, RecordedTranscription, TranscriptionScript } from "./fake-transcription.js";

export interface FakeToolCall {
  /** Default `call_<n>`. */
  id?: string;
  name: string;
  /** JSON text, sent split over several chunks. */
  arguments: string;
}

export interface FakeOpenAIUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens?: number;
  reasoningTokens?: number;
  /**
   * Where the cache hits go: `openai` (default) `prompt_tokens_details.cached_tokens`; `deepseek`
   * `prompt_cache_hit_tokens` and `prompt_cache_miss_tokens` beside `cached_tokens: 0`; `moonshot`
   * a top-level `cached_tokens`, the usage inside the last choice.
   */
  cacheStyle?: "openai" | "deepseek" | "moonshot";
}

export interface FakeOpenAIError {
  /** 429, 500, 503, 401, ... */
  status: number;
  message?: string;
  /** OpenAI error type, e.g. `insufficient_quota`. */
  type?: string;
  /** OpenAI error code, e.g. `insufficient_quota`, `rate_limit_exceeded`. */
  code?: string;
  /** `Retry-After` header value (seconds or an HTTP date). */
  retryAfter?: string;
  /** `retry-after-ms` header value. */
  retryAfterMs?: string;
}

export interface FakeOpenAIStep {
  /** The answer; an array gives the exact chunks. */
  text?: string | string[];
  /** Sent before the answer as `delta.reasoning_content` (DeepSeek, Qwen, Kimi), or as `reasoningField` says. */
  reasoning?: string | string[];
  /**
   * How the reasoning is sent: `reasoning_content` (default), `reasoning` (OpenRouter, Ollama,
   * vLLM) or `think-tags`: inside the content as `<think>…</think>`, each piece a chunk, as a server
   * without a reasoning parser does.
   */
  reasoningField?: "reasoning_content" | "reasoning" | "think-tags";
  /** Each call's arguments are split over several chunks; several calls get indexes 0, 1, ... */
  toolCalls?: FakeToolCall[];
  /** Default `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: "stop" | "length" | "tool_calls" | "content_filter";
  /** Sent in a final chunk when the request asked `stream_options.include_usage`. */
  usage?: FakeOpenAIUsage;
  /** Answer with this HTTP error instead. */
  error?: FakeOpenAIError;
  /** An `{"error": ...}` event after the content chunks instead of the finish, as servers do when generation fails. */
  streamError?: { message: string; type?: string; code?: string };
  /** Drop the connection after this many `data:` events (0: right after the headers). */
  cutAfterChunks?: number;
  /** End the response cleanly after this many events: no finish chunk, no `[DONE]`. */
  endAfterChunks?: number;
  /** Wait this long before answering (before the headers). */
  delayMs?: number;
  /** Wait until this settles before answering (a test's gate); nothing is sent if the client left meanwhile. */
  until?: Promise<unknown>;
  /** Stall this long after the content chunks, before the finish chunk. */
  hangMs?: number;
  /** Stall after the content chunks, before the finish chunk, until this settles (a test's gate for a reply half written). */
  holdUntil?: Promise<unknown>;
  /** The model name reported in chunks; default: the requested model. */
  model?: string;
  /**
   * After the content chunks, keep the stream open forever and send a chunk every `everyMs`: an
   * empty keep-alive (`delta: {content: ""}`, as some servers do) or, with `text`, that text each
   * time (a lively stream that never finishes). Ends only when the client goes away.
   */
  drip?: { everyMs: number; text?: string };
}

export interface FakeOpenAIServer {
  /** Base URL ending in `/v1`, for the SDK's `baseURL`. */
  url: string;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /** Every upload to `/audio/transcriptions`, in order. */
  transcriptions: RecordedTranscription[];
  /** TCP connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

export interface FakeOpenAIOptions {
  script: Script<FakeOpenAIStep>;
  /** Answers `/audio/transcriptions`; absent, the path is not served (404). */
  transcriptions?: TranscriptionScript;
}

export async function startFakeOpenAI(options: FakeOpenAIOptions): Promise<FakeOpenAIServer> {
  const transcriptions: RecordedTranscription[] = [];
  const transcribe = options.transcriptions && transcriptionRoute(options.transcriptions, transcriptions);
  const server = await startScriptedServer<FakeOpenAIStep>({
    name: "fake-openai",
    script: options.script,
    paths: ["/v1/chat/completions", "/chat/completions"],
    respond,
    sendError: (response, status, message) => sendJson(response, status, errorBody({ status, message, type: "fake_server_error" })),
    ...(transcribe ? { rawRoutes: { "/v1/audio/transcriptions": transcribe, "/audio/transcriptions": transcribe } } : {}),
  });
  return { url: `${server.origin}/v1`, requests: server.requests, transcriptions, connections: server.connections, close: server.close };
}

async function respond(step: FakeOpenAIStep, request: RecordedRequest, response: ServerResponse): Promise<void> {
  if (step.delayMs && !(await wait(step.delayMs, response))) return;
  if (step.until) {
    await step.until.catch(() => undefined);
    if (response.destroyed || response.writableEnded) return;
  }
  if (step.error) return sendError(step.error, response);
  const model = step.model ?? String(request.body.model ?? "fake-model");
  if (request.body.stream === true) return streamAnswer(step, request, model, response);
  if (step.hangMs && !(await wait(step.hangMs, response))) return;
  sendJson(response, 200, completion(step, model));
}

function sendError(error: FakeOpenAIError, response: ServerResponse): void {
  const headers: Record<string, string> = {};
  if (error.retryAfter !== undefined) headers["retry-after"] = error.retryAfter;
  if (error.retryAfterMs !== undefined) headers["retry-after-ms"] = error.retryAfterMs;
  sendJson(response, error.status, errorBody(error), headers);
}

function errorBody(error: FakeOpenAIError) {
  const type = error.type ?? (error.status === 429 ? "rate_limit_error" : error.status >= 500 ? "server_error" : "invalid_request_error");
  return { error: { message: error.message ?? `fake error ${error.status}`, type, param: null, code: error.code ?? null } };
}

async function streamAnswer(step: FakeOpenAIStep, request: RecordedRequest, model: string, response: ServerResponse): Promise<void> {
  const base = { id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1_700_000_000, model, system_fingerprint: "fp_fake" };
  const includeUsage = (request.body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...(includeUsage ? { usage: null } : {}),
  });

  const content: object[] = [];
  const field = step.reasoningField ?? "reasoning_content";
  const reasoning = pieces(step.reasoning);
  if (field === "think-tags" && reasoning.length > 0) {
    for (const piece of ["<thi", "nk>", ...reasoning, "</th", "ink>\n\n"]) content.push(chunk({ content: piece }));
  } else {
    for (const piece of reasoning) content.push(chunk({ [field]: piece }));
  }
  for (const piece of pieces(step.text)) content.push(chunk({ content: piece }));
  (step.toolCalls ?? []).forEach((call, index) => {
    content.push(
      chunk({ tool_calls: [{ index, id: call.id ?? `call_${index}`, type: "function", function: { name: call.name, arguments: "" } }] }),
    );
    for (const piece of splitText(call.arguments, 3)) content.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
  });
  const first = content[0] as { choices: Array<{ delta: Record<string, unknown> }> } | undefined;
  if (first?.choices[0]) first.choices[0].delta = { role: "assistant", ...first.choices[0].delta };

  const finishReason = step.finishReason ?? (step.toolCalls?.length ? "tool_calls" : "stop");
  const ending: Array<object | string> = [];
  if (step.streamError) {
    ending.push({ error: { message: step.streamError.message, type: step.streamError.type ?? "server_error", code: step.streamError.code ?? null } });
  } else {
    const finish = chunk(content.length ? {} : { role: "assistant", content: "" }, finishReason);
    if (step.usage?.cacheStyle === "moonshot") {
      finish.choices[0] = { ...finish.choices[0]!, usage: toWireUsage(step.usage) } as (typeof finish.choices)[number];
      ending.push(finish);
    } else {
      ending.push(finish);
      if (includeUsage && step.usage) ending.push({ ...base, choices: [], usage: toWireUsage(step.usage) });
    }
    ending.push("[DONE]");
  }

  const line = (event: object | string) => `data: ${typeof event === "string" ? event : JSON.stringify(event)}\n\n`;
  if (step.cutAfterChunks === undefined && step.endAfterChunks === undefined && !step.hangMs && !step.drip && step.holdUntil === undefined) {
    // Nothing to time or to break: the whole answer in one write, so a burst of thousands of calls
    // costs the server (and the benchmarks that share its machine) one write each.
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    response.end([...content, ...ending].map(line).join(""));
    return;
  }
  startEventStream(response);
  let sent = 0;
  const send = async (event: object | string): Promise<boolean> => {
    if (step.cutAfterChunks !== undefined && sent >= step.cutAfterChunks) {
      await cut(response);
      return false;
    }
    if (step.endAfterChunks !== undefined && sent >= step.endAfterChunks) {
      response.end();
      return false;
    }
    await write(response, line(event));
    sent += 1;
    return !response.destroyed;
  };
  for (const event of content) if (!(await send(event))) return;
  if (step.drip) {
    const drop = step.drip.text === undefined ? { content: "" } : { content: step.drip.text };
    while (await wait(step.drip.everyMs, response)) if (!(await send(chunk(drop)))) return;
    return;
  }
  if (step.hangMs && !(await wait(step.hangMs, response))) return;
  if (step.holdUntil) {
    await step.holdUntil.catch(() => undefined);
    if (response.destroyed || response.writableEnded) return;
  }
  for (const event of ending) if (!(await send(event))) return;
  response.end();
}

function completion(step: FakeOpenAIStep, model: string) {
  const text = pieces(step.text).join("");
  const reasoning = pieces(step.reasoning).join("");
  const toolCalls = (step.toolCalls ?? []).map((call, index) => ({
    id: call.id ?? `call_${index}`,
    type: "function",
    function: { name: call.name, arguments: call.arguments },
  }));
  return {
    id: "chatcmpl-fake",
    object: "chat.completion",
    created: 1_700_000_000,
    model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: text || null,
          ...(reasoning ? { reasoning_content: reasoning } : {}),
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        logprobs: null,
        finish_reason: step.finishReason ?? (toolCalls.length ? "tool_calls" : "stop"),
      },
    ],
    usage: toWireUsage(step.usage ?? { promptTokens: 0, completionTokens: 0 }),
  };
}

function toWireUsage(usage: FakeOpenAIUsage): Record<string, unknown> {
  const cached = usage.cachedTokens ?? 0;
  const wire: Record<string, unknown> = {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
  };
  if (usage.cacheStyle === "deepseek") return { ...wire, prompt_tokens_details: { cached_tokens: 0 }, prompt_cache_hit_tokens: cached, prompt_cache_miss_tokens: usage.promptTokens - cached };
  if (usage.cacheStyle === "moonshot") return { ...wire, cached_tokens: cached };
  return { ...wire, prompt_tokens_details: { cached_tokens: cached } };
}

function pieces(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return typeof value === "string" ? [value] : value;
}
