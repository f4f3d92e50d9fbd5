/**
 * Discord's errors, normalized into ChannelError. @discordjs/rest throws DiscordAPIError for a 4xx
 * (Discord's `{ code, message, errors }`), HTTPError for a 5xx it stopped retrying, RateLimitError
 * for a 429 it was told not to wait out (see `rejectOnRateLimit` in the adapter), and undici's
 * errors (or an AbortError on its timeout) when no answer came. The token travels in a header and
 * the IDENTIFY frame, not in URLs, but every message that leaves here is scrubbed all the same.
 */
import { DiscordAPIError, HTTPError, RateLimitError } from "discord.js";
import { ChannelError, type ChannelErrorKind } from "../../src/errors.js";
import { type Scrub, scrubError } from "../../src/gateway/kit/index.js";

const CHANNEL = "discord";

/** Discord's JSON error codes the mapping reads. */
const ErrorCodes = {
  UnknownChannel: 10003,
  UnknownGuild: 10004,
  UnknownMessage: 10008,
  UnknownUser: 10013,
  MissingAccess: 50001,
  CannotSendToUser: 50007,
  MissingPermissions: 50013,
  InvalidFormBody: 50035,
} as const;

/** The field errors of an Invalid Form Body answer, flattened to `field: CODE`. */
function fieldErrors(raw: unknown, path = ""): string[] {
  if (typeof raw !== "object" || raw === null) return [];
  const found: string[] = [];
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    if (key === "_errors" && Array.isArray(value)) {
      for (const item of value) found.push(`${path}: ${String((item as { code?: unknown }).code ?? "")}`);
    } else {
      found.push(...fieldErrors(value, path ? `${path}.${key}` : key));
    }
  }
  return found;
}

function kindOfApiError(error: DiscordAPIError): ChannelErrorKind {
  const { status, code } = error;
  if (status === 429) return "rate-limit";
  if (status === 401) return "auth";
  if (status === 403 || code === ErrorCodes.MissingAccess || code === ErrorCodes.MissingPermissions || code === ErrorCodes.CannotSendToUser) return "forbidden";
  if (status === 404 || code === ErrorCodes.UnknownChannel || code === ErrorCodes.UnknownMessage || code === ErrorCodes.UnknownGuild || code === ErrorCodes.UnknownUser) return "not-found";
  if (code === ErrorCodes.InvalidFormBody) {
    const fields = fieldErrors((error.rawError as { errors?: unknown }).errors);
    if (fields.some((field) => field.startsWith("content: BASE_TYPE_MAX_LENGTH"))) return "too-long";
    // The text itself was refused (not the reply target or the nonce): the plain resend may pass.
    if (fields.some((field) => field.startsWith("content"))) return "formatting";
  }
  return "other";
}

function isNetworkFailure(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = String((error as { code?: unknown }).code ?? (error.cause as { code?: unknown } | undefined)?.code ?? "");
  return error.name === "AbortError" || error.name === "TimeoutError" || /fetch failed|socket|other side closed/i.test(error.message) || /^(E[A-Z]+|UND_ERR_\w+)$/.test(code);
}

/** Normalizes anything the REST client threw during `operation` into a ChannelError without the token. */
export function toChannelError(error: unknown, operation: string, scrub: Scrub): ChannelError {
  if (error instanceof ChannelError) return error;
  scrubError(error, scrub);
  if (error instanceof RateLimitError) {
    // The bot's own budget (global), or the channel's bucket (user, shared): discordQuotas' names.
    const scope = error.global || error.scope === "global" ? "bot" : "channel";
    return new ChannelError(scrub(`discord ${operation} rate-limited for ${error.retryAfter} ms (${error.route}, ${error.scope})`), CHANNEL, {
      kind: "rate-limit",
      retryAfterMs: error.retryAfter,
      scope,
      cause: error,
    });
  }
  if (error instanceof DiscordAPIError) {
    const kind = kindOfApiError(error);
    const hint = error.status === 401 ? " (the bot token was refused)" : "";
    return new ChannelError(scrub(`discord ${operation} failed: ${error.status} ${error.code} ${error.message}${hint}`), CHANNEL, { kind, cause: error });
  }
  if (error instanceof HTTPError) {
    return new ChannelError(scrub(`discord ${operation} failed: ${error.status} ${error.message}`), CHANNEL, { kind: error.status >= 500 ? "network" : "other", cause: error });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ChannelError(scrub(`discord ${operation} failed: ${message}`), CHANNEL, { kind: isNetworkFailure(error) ? "network" : "other", cause: error });
}
