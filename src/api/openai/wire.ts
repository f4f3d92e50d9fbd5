/**
 * The OpenAI Chat Completions wire format, as far as the endpoint speaks it: the request body
 * (zod, parsed once at the edge, a bad field named in `param`), the error shape
 * `{ error: { message, type, param, code } }`, and the `chat.completion` and
 * `chat.completion.chunk` objects, typed with the `openai` SDK's own types so they stay in step
 * with what its clients parse.
 *
 * The request is loose (clients send many fields the agent has no use for: `temperature`,
 * `max_tokens`, `seed`, ... are accepted and ignored), except where ignoring would mislead:
 * more than one choice, and tools the client would run itself, are refused.
 */
import type { ChatCompletion, ChatCompletionChunk } from "openai/resources/chat/completions";
import type { CompletionUsage } from "openai/resources/completions";
import { z } from "zod";
import { describeIssue, formatPath, safeParseReporting } from "../../config/issues.js";
import { RequestError } from "../../gateway/http-request.js";
import type { Refusal } from "../server.js";

/** A session id (`user`, `X-Session-Id`): becomes part of the session key `openai:<key>:<id>`. */
export const SessionIdSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[\w.@-]+$/, "letters, digits and _ . @ - only");

const ContentPartSchema = z.looseObject({ type: z.string(), text: z.unknown().optional() });

const MessageSchema = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool", "function"]),
  content: z.union([z.string(), z.array(ContentPartSchema), z.null()], { error: "expected a string or an array of content parts" }).optional(),
});

const NO_CLIENT_TOOLS = "the agent runs its own tools on the server and calls none of the client's";

export const ChatCompletionRequestSchema = z.looseObject({
  model: z.string().min(1).max(256),
  messages: z.array(MessageSchema).min(1).max(10_000),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  // An empty `user` is what some clients send for "none".
  user: z.preprocess((value) => (value === "" ? undefined : value), SessionIdSchema.optional()),
  n: z.number().int().min(1).max(1).nullish(),
  tools: z.array(z.unknown()).nullish().refine((list) => !list?.length, `client-side tools are not supported: ${NO_CLIENT_TOOLS}`),
  functions: z.array(z.unknown()).nullish().refine((list) => !list?.length, `client-side functions are not supported: ${NO_CLIENT_TOOLS}`),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

/** What OpenAI calls the kinds of errors; clients branch on `type` and `code`. */
export type OpenAiErrorType = "invalid_request_error" | "rate_limit_error" | "server_error";

/** A request the endpoint refuses, with OpenAI's error fields. The server's error handler sends it. */
export class OpenAiError extends RequestError {
  override name = "OpenAiError";
  constructor(
    message: string,
    statusCode: number,
    readonly details: { param?: string; code?: string; type?: OpenAiErrorType } = {},
  ) {
    super(message, statusCode);
  }
}

/** Parses the body, or throws an OpenAiError whose `param` names the first bad field. */
export function parseChatRequest(body: unknown): ChatCompletionRequest {
  const result = safeParseReporting(ChatCompletionRequestSchema, body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const param = issue.path.length === 0 ? "body" : formatPath(issue.path);
  throw new OpenAiError(`${param}: ${describeIssue(issue, { schema: ChatCompletionRequestSchema })}`, 400, { param, code: "invalid_value" });
}

/**
 * The text of the request's last message, which must be the user's: it is what the agent answers.
 * The conversation before it is the session's, kept on the server, so earlier messages (and
 * system prompts: the agent has its own) are not read.
 */
export function userTurnOf(request: ChatCompletionRequest): string {
  const index = request.messages.length - 1;
  const last = request.messages[index]!;
  const at = `messages[${index}]`;
  if (last.role !== "user") {
    throw new OpenAiError(`${at}.role: the last message must be the user's (role "user"), got "${last.role}"; the conversation before it is kept on the server`, 400, { param: `${at}.role`, code: "invalid_value" });
  }
  let text: string;
  if (typeof last.content === "string") text = last.content;
  else if (Array.isArray(last.content)) {
    const pieces: string[] = [];
    for (const [position, part] of last.content.entries()) {
      const param = `${at}.content[${position}]`;
      if (part.type !== "text") throw new OpenAiError(`${param}.type: only text parts are supported, got "${part.type}"`, 400, { param: `${param}.type`, code: "invalid_value" });
      if (typeof part.text !== "string") throw new OpenAiError(`${param}.text: expected a string`, 400, { param: `${param}.text`, code: "invalid_value" });
      pieces.push(part.text);
    }
    text = pieces.join("\n");
  } else text = "";
  if (text.trim() === "") throw new OpenAiError(`${at}.content: expected some text`, 400, { param: `${at}.content`, code: "invalid_value" });
  return text;
}

/** The body of an error answer, in OpenAI's shape. */
export function openAiErrorBody(refusal: Refusal): { error: { message: string; type: string; param: string | null; code: string | null } } {
  const own = refusal.error instanceof OpenAiError ? refusal.error.details : {};
  const type = own.type ?? (refusal.status === 429 ? "rate_limit_error" : refusal.status >= 500 ? "server_error" : "invalid_request_error");
  return { error: { message: refusal.message, type, param: own.param ?? null, code: own.code ?? refusal.code ?? frameworkCode(refusal) } };
}

/** Codes for what the HTTP layer refuses before a handler runs. */
function frameworkCode(refusal: Refusal): string | null {
  if (refusal.status === 415) return "unsupported_media_type";
  if (refusal.status === 413) return "request_too_large";
  if (refusal.status === 400) return "invalid_request";
  return null;
}

/** Token counts as the turn recorded them (an outbound message's `metadata.usage`, a run's nodes). */
export interface TokenCounts {
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens?: number;
  reasoningTokens?: number;
}

const TokenCountsSchema = z.object({
  inputTokens: z.number().nonnegative(),
  outputTokens: z.number().nonnegative(),
  cachedInputTokens: z.number().nonnegative().optional(),
  reasoningTokens: z.number().nonnegative().optional(),
});

/** The counts in a message's metadata, when they are there and well formed. */
export function tokenCountsOf(value: unknown): TokenCounts | undefined {
  const parsed = TokenCountsSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

export function completionUsage(counts: TokenCounts | undefined): CompletionUsage {
  const prompt = counts?.inputTokens ?? 0;
  const completion = counts?.outputTokens ?? 0;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(counts?.cachedInputTokens === undefined ? {} : { prompt_tokens_details: { cached_tokens: counts.cachedInputTokens } }),
    ...(counts?.reasoningTokens === undefined ? {} : { completion_tokens_details: { reasoning_tokens: counts.reasoningTokens } }),
  };
}

/** What every object of one answer shares. */
export interface AnswerHeader {
  /** `chatcmpl-...`, the same in every chunk of a stream. */
  id: string;
  /** Seconds since the epoch. */
  created: number;
  /** The model name the request asked for. */
  model: string;
}

export function completionObject(header: AnswerHeader, content: string, usage: TokenCounts | undefined): ChatCompletion {
  return {
    ...header,
    object: "chat.completion",
    choices: [{ index: 0, message: { role: "assistant", content, refusal: null }, logprobs: null, finish_reason: "stop" }],
    usage: completionUsage(usage),
  };
}

/** A chunk with one choice; with `includeUsage` it carries `usage: null`, as OpenAI's do. */
export function chunkObject(header: AnswerHeader, delta: ChatCompletionChunk.Choice.Delta, finishReason: "stop" | null, includeUsage: boolean): ChatCompletionChunk {
  return {
    ...header,
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...(includeUsage ? { usage: null } : {}),
  };
}

/** The chunk after the last choice, when the request asked `stream_options.include_usage`. */
export function usageChunk(header: AnswerHeader, usage: TokenCounts | undefined): ChatCompletionChunk {
  return { ...header, object: "chat.completion.chunk", choices: [], usage: completionUsage(usage) };
}

/**
 * What of the final text a stream has not shown yet. Drafts show the reply as it grows, so the
 * final usually extends them; where it does not (a draft lost on the way, a closing note), the
 * longest end of what was shown that starts the final is taken as shown, and the rest is sent.
 */
export function unshownTail(shown: string, final: string): string {
  if (final.startsWith(shown)) return final.slice(shown.length);
  // KMP over final + separator + shown: the longest suffix of `shown` that is a prefix of `final`.
  const text = `${final}\u0000${shown}`;
  const border = new Array<number>(text.length).fill(0);
  for (let index = 1; index < text.length; index++) {
    let length = border[index - 1]!;
    while (length > 0 && text[index] !== text[length]) length = border[length - 1]!;
    if (text[index] === text[length]) length += 1;
    border[index] = length;
  }
  const overlap = Math.min(border[text.length - 1]!, final.length);
  return overlap === 0 && shown !== "" ? `\n\n${final}` : final.slice(overlap);
}
