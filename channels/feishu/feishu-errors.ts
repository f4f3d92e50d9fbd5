/**
 * Feishu's errors, normalized into ChannelError. A business failure reaches us two ways: HTTP 400
 * (or 429) with `{code, msg}`, which the SDK throws as an axios error, or HTTP 200 with `code ≠ 0`,
 * which it returns as if all were well. {@link checked} turns the second into the first, and
 * {@link toChannelError} maps both (and transport failures) onto the ChannelError kinds the
 * dispatcher acts on. The SDK's errors carry the request (the app secret, for a token call): none
 * of it leaves here, only the code and message.
 */
import { ChannelError, type ChannelErrorKind } from "../../src/errors.js";
import { type Scrub, createScrubber } from "../../src/gateway/kit/index.js";

const CHANNEL = "feishu";
const DEFAULT_RATE_LIMIT_WAIT_MS = 1_000;

/**
 * 99991400: the open platform's per-app frequency limit; 230020: IM's per-chat limit (5 a second);
 * 11232/11233: message sending over its limit.
 */
const rateLimitCodes = new Set([99991400, 230020, 11232, 11233]);
/** The app's credentials were refused: a wrong app secret, a tenant token that is not valid. */
const authCodes = new Set([10014, 99991543, 99991663, 99991664]);
/** The app's own frequency limit (the rest of rateLimitCodes are the chat's): feishuQuotas' names. */
const appLimitCodes = new Set([99991400]);
/** The bot is not in the chat, was removed, has no rights or is not available to the user. */
const forbiddenCodes = new Set([230002, 230006, 230013, 230027, 230035, 232009, 99991672]);
/** The message was withdrawn or deleted, or the chat or resource is gone. */
const notFoundCodes = new Set([230011, 231003, 230110, 234003, 234004, 232010]);
/** The message or card is over the platform's size limit. */
const tooLongCodes = new Set([230025, 230028]);
/** The card (its JSON, markdown or components) was refused. */
const formattingCodes = new Set([230099, 11310, 200621, 200861]);

/** A Feishu business failure, before it is mapped. */
export class FeishuApiFailure extends Error {
  override name = "FeishuApiFailure";
  constructor(
    readonly code: number,
    message: string,
    readonly status: number,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

interface AxiosLike {
  message: string;
  code?: string;
  response?: { status: number; data?: unknown; headers?: Record<string, unknown> };
}

function isAxiosLike(error: unknown): error is AxiosLike {
  return typeof error === "object" && error !== null && ("isAxiosError" in error || "response" in error) && "message" in error;
}

function resetMs(headers: Record<string, unknown> | undefined): number | undefined {
  const value = headers?.["x-ogw-ratelimit-reset"];
  const seconds = Number(Array.isArray(value) ? value[0] : value);
  return Number.isFinite(seconds) && seconds >= 0 ? Math.max(seconds * 1000, 100) : undefined;
}

/** The `{code, msg}` of an answer body, if it has one. */
function businessCode(data: unknown): { code: number; msg: string } | undefined {
  if (typeof data !== "object" || data === null) return undefined;
  const { code, msg } = data as { code?: unknown; msg?: unknown };
  return typeof code === "number" ? { code, msg: typeof msg === "string" ? msg : "" } : undefined;
}

/** Throws the failure of an HTTP-200 answer whose `code` is not 0; returns the answer otherwise. */
export function checked<T>(answer: T): T {
  const business = businessCode(answer);
  if (business && business.code !== 0) throw new FeishuApiFailure(business.code, business.msg, 200);
  return answer;
}

function kindOf(code: number, status: number, message: string): ChannelErrorKind {
  if (status === 429 || rateLimitCodes.has(code)) return "rate-limit";
  if (status === 401 || authCodes.has(code)) return "auth";
  if (forbiddenCodes.has(code) || status === 403) return "forbidden";
  if (notFoundCodes.has(code)) return "not-found";
  if (tooLongCodes.has(code)) return "too-long";
  if (formattingCodes.has(code) || /card|markdown/i.test(message)) return "formatting";
  if (status >= 500) return "network";
  return "other";
}

/** Removes every secret from a text: the configured ones, and the tenant tokens (`t-…`) made from them. */
export function feishuScrubber(secrets: ReadonlyArray<string | undefined>): Scrub {
  return createScrubber(secrets, { patterns: [/\bt-[\w-]{16,}/] });
}

/** Maps whatever a call of `method` threw (SDK, axios, our own checks) onto a ChannelError. */
export function toChannelError(error: unknown, method: string, scrub: Scrub): ChannelError {
  if (error instanceof ChannelError) return error;
  let code = 0;
  let status = 0;
  let detail: string;
  let retryAfterMs: number | undefined;
  if (error instanceof FeishuApiFailure) {
    ({ code, status, retryAfterMs } = error);
    detail = `${code} ${error.message}`;
  } else if (isAxiosLike(error) && error.response) {
    status = error.response.status;
    const business = businessCode(error.response.data);
    code = business?.code ?? 0;
    retryAfterMs = resetMs(error.response.headers);
    detail = business ? `${status} ${business.code} ${business.msg}` : `${status} ${error.message}`;
  } else {
    // No answer at all: refused, reset, timed out.
    const message = error instanceof Error ? error.message : String(error);
    const cause = new Error(scrub(message));
    return new ChannelError(scrub(`feishu ${method} failed: ${message}`), CHANNEL, { kind: "network", cause });
  }
  const kind = kindOf(code, status, detail);
  const message = scrub(`feishu ${method} failed: ${detail}`.trim());
  return new ChannelError(message, CHANNEL, {
    kind,
    // A sanitized cause: the SDK's error holds the request, and a token request holds the app secret.
    cause: new FeishuApiFailure(code, message, status, retryAfterMs),
    retryAfterMs: kind === "rate-limit" ? (retryAfterMs ?? DEFAULT_RATE_LIMIT_WAIT_MS) : undefined,
    ...(kind === "rate-limit" ? { scope: appLimitCodes.has(code) || status === 429 ? "app" : "chat" } : {}),
  });
}
