/**
 * QQ's failures, normalized into ChannelError. The OpenAPI answers a failure with an HTTP status
 * and `{code, message}` (`err_code` and `trace_id` besides); {@link failureOf} reads it and
 * {@link toChannelError} maps it (and transport failures) onto the kinds the dispatcher acts on.
 * No message leaves here unscrubbed: the app secret and every access token issued are replaced.
 *
 * The codes read here, from QQ's error code list: 11241–11244 the token (refused, expired),
 * 22009 and 20028 message frequency, 40054005 a `msg_seq` already used with this `msg_id` (the
 * reply was deduplicated), and passive replies refused because their `msg_id` expired or was
 * replied to too often; the last are recognized by their text as well, QQ's codes for them vary.
 */
import { ChannelError, type ChannelErrorKind } from "../../src/errors.js";
import { type IssuedSecretScrubber, type Scrub, createIssuedSecretScrubber, transportFailure } from "../../src/gateway/kit/index.js";
import { DEFAULT_RETRY_AFTER_MS } from "./quotas.js";

const CHANNEL = "qq";

/** A QQ answer that said no, before it is mapped. */
export class QQApiFailure extends Error {
  override name = "QQApiFailure";
  constructor(
    readonly status: number,
    readonly code: number,
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** The failure an answer stands for, if it is one: a non-2xx status, or a 2xx with a non-zero `code` and no message id. */
export function failureOf(status: number, body: unknown, retryAfter?: string | null): QQApiFailure | undefined {
  const fields = typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {};
  const code = typeof fields.code === "number" ? fields.code : typeof fields.err_code === "number" ? fields.err_code : 0;
  if (status >= 200 && status < 300 && code === 0) return undefined;
  const seconds = Number(retryAfter);
  const retryAfterMs = retryAfter && Number.isFinite(seconds) && seconds >= 0 ? Math.max(seconds * 1000, 100) : undefined;
  const message = typeof fields.message === "string" ? fields.message : "";
  return new QQApiFailure(status, code, message, retryAfterMs);
}

const TOKEN_CODES = new Set([11241, 11242, 11243, 11244]);
const RATE_CODES = new Set([22009, 20028, 304045]);
/** A `msg_seq` this `msg_id` was already answered with. */
export const DUPLICATE_SEQ_CODE = 40054005;

/** QQ refused a passive reply because its message is too old or was answered too often: the reply window is closed. */
export function isWindowClosed(failure: QQApiFailure): boolean {
  return /msg_?id/i.test(failure.message) && /expire|过期|超过|exceed|limit|次数|invalid|无效/i.test(failure.message);
}

function kindOf(failure: QQApiFailure): ChannelErrorKind {
  const { status, code } = failure;
  if (status === 401 || TOKEN_CODES.has(code)) return "auth";
  if (status === 429 || RATE_CODES.has(code)) return "rate-limit";
  if (status === 404) return "not-found";
  if (status === 403 || isWindowClosed(failure)) return "forbidden";
  if (/markdown|msg_type|模板/i.test(failure.message)) return "formatting";
  if (/too long|过长|length/i.test(failure.message)) return "too-long";
  if (status >= 500) return "network";
  return "other";
}

/** The scrubber of one bot: its secret, and each access token as it is issued. */
export type QQScrubber = IssuedSecretScrubber;

export function createQQScrubber(secrets: ReadonlyArray<string | undefined>): QQScrubber {
  return createIssuedSecretScrubber(secrets, [/QQBot\s+[A-Za-z0-9._~+/=-]{8,}/]);
}

/** Maps whatever `operation` threw (a failure answer, fetch, our own checks) onto a ChannelError without a secret in it. */
export function toChannelError(error: unknown, operation: string, scrub: Scrub): ChannelError {
  if (error instanceof ChannelError) return error;
  if (error instanceof QQApiFailure) {
    const kind = kindOf(error);
    const hint = kind === "auth" ? " (the AppID and AppSecret, or the token bought with them, were refused)" : "";
    const message = scrub(`qq ${operation} failed: ${error.status} ${error.code} ${error.message}${hint}`.trim());
    return new ChannelError(message, CHANNEL, {
      kind,
      cause: new QQApiFailure(error.status, error.code, scrub(error.message), error.retryAfterMs),
      ...(kind === "rate-limit" ? { retryAfterMs: error.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS } : {}),
    });
  }
  return transportFailure(error, CHANNEL, operation, scrub);
}
