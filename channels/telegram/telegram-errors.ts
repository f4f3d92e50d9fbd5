/**
 * Telegram's errors, normalized into ChannelError. The Bot API answers `{ ok: false, error_code,
 * description, parameters }`; telegraf throws that as a TelegramError, and node-fetch's FetchError
 * when the request never got an answer. Both may carry the bot token (it is part of every URL), so
 * every message and stack that leaves this module has the token scrubbed.
 */
import { ChannelError, type ChannelErrorKind } from "../../src/errors.js";
import { type Scrub, scrubError } from "../../src/gateway/kit/index.js";

const CHANNEL = "telegram";

/** The shape of telegraf's TelegramError that the mapping reads (no class check: telegraf may be bundled twice). */
interface ApiFailure {
  response: { error_code: number; description?: string; parameters?: { retry_after?: number } };
}

function isApiFailure(error: unknown): error is ApiFailure {
  if (typeof error !== "object" || error === null || !("response" in error)) return false;
  const response = (error as { response: unknown }).response;
  return typeof response === "object" && response !== null && typeof (response as { error_code?: unknown }).error_code === "number";
}

const formattingRejections = /can't parse entities|unsupported start tag|can't find end tag|unexpected end tag|unclosed start tag/i;
const tooLong = /message is too long|text is too long|MESSAGE_TOO_LONG/i;
const notFound = /chat not found|message to edit not found|message to be replied not found|message to reply not found|user not found|message_id_invalid|thread not found/i;

function kindOf(code: number, description: string): ChannelErrorKind {
  if (code === 429) return "rate-limit";
  if (code === 401) return "auth";
  if (code === 403) return "forbidden";
  if (code >= 500) return "network";
  if (code === 400 && formattingRejections.test(description)) return "formatting";
  if (code === 400 && tooLong.test(description)) return "too-long";
  if ((code === 400 || code === 404) && notFound.test(description)) return "not-found";
  return "other";
}

/** Whether the error is the "nothing changed" answer of an edit, which is a success for us. */
export function isNotModified(error: unknown): boolean {
  return isApiFailure(error) && error.response.error_code === 400 && /message is not modified/i.test(error.response.description ?? "");
}

export function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === "AbortError";
}

/** Normalizes anything telegraf or fetch threw while calling `method` into a ChannelError without the token. */
export function toChannelError(error: unknown, method: string, scrub: Scrub): ChannelError {
  if (error instanceof ChannelError) return error;
  scrubError(error, scrub);
  if (isApiFailure(error)) {
    const { error_code: code, description = "", parameters } = error.response;
    const kind = kindOf(code, description);
    const retryAfter = parameters?.retry_after;
    return new ChannelError(scrub(`telegram ${method} failed: ${code} ${description}`.trim()), CHANNEL, {
      kind,
      cause: error,
      retryAfterMs: kind === "rate-limit" && typeof retryAfter === "number" ? retryAfter * 1000 : undefined,
    });
  }
  const message = error instanceof Error ? error.message : String(error);
  // FetchError (node-fetch), TypeError "fetch failed" (undici), aborts and socket errors: the request got no answer.
  const network =
    error instanceof Error &&
    (error.name === "FetchError" || error.name === "AbortError" || message === "fetch failed" || /^E[A-Z]+$/.test(String((error as { code?: unknown }).code)));
  return new ChannelError(scrub(`telegram ${method} failed: ${message}`), CHANNEL, { kind: network ? "network" : "other", cause: error });
}
