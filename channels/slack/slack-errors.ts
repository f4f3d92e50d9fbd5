/**
 * Slack's failures, normalized into ChannelError. The Web API answers HTTP 200 with `{ok: false,
 * error: "channel_not_found"}` for most refusals (the SDK's WebAPIPlatformError), HTTP 429 with
 * `Retry-After` for a rate limit (WebAPIRateLimitedError, the client being told to throw it),
 * another status for a failure of Slack's own (WebAPIHTTPError), and WebAPIRequestError when no
 * answer came. Tokens travel in the Authorization header, but every message that leaves here is
 * scrubbed all the same.
 */
import { ErrorCode, type WebAPICallError } from "@slack/web-api";
import { ChannelError, type ChannelErrorKind } from "../../src/errors.js";
import { type Scrub, scrubError } from "../../src/gateway/kit/index.js";
import { DEFAULT_RETRY_AFTER_MS } from "./quotas.js";

const CHANNEL = "slack";

const kinds: Record<string, ChannelErrorKind> = {
  ratelimited: "rate-limit",
  rate_limited: "rate-limit",
  message_limit_exceeded: "rate-limit",
  invalid_auth: "auth",
  not_authed: "auth",
  account_inactive: "auth",
  token_revoked: "auth",
  token_expired: "auth",
  not_in_channel: "forbidden",
  channel_is_archived: "forbidden",
  is_archived: "forbidden",
  restricted_action: "forbidden",
  restricted_action_read_only_channel: "forbidden",
  restricted_action_thread_only_channel: "forbidden",
  missing_scope: "forbidden",
  access_denied: "forbidden",
  ekm_access_denied: "forbidden",
  team_access_not_granted: "forbidden",
  channel_not_found: "not-found",
  message_not_found: "not-found",
  thread_not_found: "not-found",
  user_not_found: "not-found",
  // The message cannot be edited by this app (not its own, or too old): sent anew instead.
  cant_update_message: "not-found",
  edit_window_closed: "not-found",
  msg_too_long: "too-long",
  invalid_blocks: "formatting",
  invalid_blocks_format: "formatting",
  markdown_text_conflict: "formatting",
  internal_error: "network",
  fatal_error: "network",
  service_unavailable: "network",
  request_timeout: "network",
};

/** The quota scope (quotas.ts) a refused method's budget is. */
const scopeOf: Record<string, string> = { "chat.postMessage": "channel", "chat.update": "updates" };

interface SlackErrorShape {
  code?: unknown;
  data?: { error?: unknown };
  retryAfter?: unknown;
  statusCode?: unknown;
  original?: unknown;
}

function isSdkError(error: unknown): error is WebAPICallError {
  return error instanceof Error && Object.values(ErrorCode).includes((error as SlackErrorShape).code as ErrorCode);
}

/** The `error` code of a platform refusal, if that is what `error` is. */
export function platformCodeOf(error: unknown): string | undefined {
  if (!isSdkError(error) || error.code !== ErrorCode.PlatformError) return undefined;
  const code = error.data.error;
  return typeof code === "string" ? code : undefined;
}

/** Maps whatever a Web API call (`operation`, the method's name) threw onto a ChannelError without a secret in it. */
export function toChannelError(error: unknown, operation: string, scrub: Scrub): ChannelError {
  if (error instanceof ChannelError) return error;
  scrubError(error, scrub);
  const scope = scopeOf[operation];
  if (isSdkError(error)) {
    switch (error.code) {
      case ErrorCode.RateLimitedError: {
        const retryAfterMs = Math.max(error.retryAfter * 1000, 100);
        return new ChannelError(`slack ${operation} rate-limited for ${retryAfterMs} ms`, CHANNEL, { kind: "rate-limit", retryAfterMs, ...(scope ? { scope } : {}), cause: error });
      }
      case ErrorCode.PlatformError: {
        const code = String(error.data.error);
        const kind = kinds[code] ?? "other";
        const hint = kind === "auth" ? " (the token was refused)" : code === "missing_scope" ? " (add the scope the README lists, then reinstall the app)" : "";
        return new ChannelError(scrub(`slack ${operation} failed: ${code}${hint}`), CHANNEL, {
          kind,
          cause: error,
          ...(kind === "rate-limit" ? { retryAfterMs: DEFAULT_RETRY_AFTER_MS, ...(scope ? { scope } : {}) } : {}),
        });
      }
      case ErrorCode.HTTPError:
        return new ChannelError(scrub(`slack ${operation} failed: HTTP ${error.statusCode} ${error.statusMessage}`), CHANNEL, {
          kind: error.statusCode >= 500 ? "network" : error.statusCode === 401 ? "auth" : error.statusCode === 403 ? "forbidden" : "other",
          cause: error,
        });
      case ErrorCode.RequestError:
        return new ChannelError(scrub(`slack ${operation} failed: ${error.original.message}`), CHANNEL, { kind: "network", cause: error });
    }
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ChannelError(scrub(`slack ${operation} failed: ${message}`), CHANNEL, { kind: isNetworkFailure(error) ? "network" : "other", cause: error });
}

function isNetworkFailure(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = String((error as { code?: unknown }).code ?? (error.cause as { code?: unknown } | undefined)?.code ?? "");
  return error.name === "AbortError" || error.name === "TimeoutError" || /fetch failed|socket|other side closed|network/i.test(error.message) || /^(E[A-Z]+|UND_ERR_\w+)$/.test(code);
}
