/**
 * WeCom's failures, normalized into ChannelError. The server API answers HTTP 200 with
 * `{errcode, errmsg}` (errcode 0: done); {@link failureOf} reads it, {@link toChannelError} maps it
 * (and transport failures) onto the kinds the dispatcher acts on. No message leaves here
 * unscrubbed: the Secret, the access tokens made from it and `access_token=` / `corpsecret=`
 * query values are replaced.
 */
import { ChannelError, type ChannelErrorKind } from "../../src/errors.js";
import { type IssuedSecretScrubber, type Scrub, createIssuedSecretScrubber, transportFailure } from "../../src/gateway/kit/index.js";
import { RETRY_AFTER_MS } from "./quotas.js";

const CHANNEL = "wecom";

/** A WeCom answer that said no, before it is mapped. */
export class WeComApiFailure extends Error {
  override name = "WeComApiFailure";
  constructor(
    readonly status: number,
    readonly errcode: number,
    message: string,
  ) {
    super(message);
  }
}

/** The access token was refused: invalid (40014), expired (42001), missing (41001). */
export const TOKEN_REFUSED = new Set([40014, 42001, 41001, 40001]);

/** The failure an answer stands for, if it is one: a non-2xx status, or an errcode other than 0. */
export function failureOf(status: number, body: unknown): WeComApiFailure | undefined {
  const fields = typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {};
  const errcode = typeof fields.errcode === "number" ? fields.errcode : undefined;
  if (status >= 200 && status < 300 && (errcode === undefined || errcode === 0)) return undefined;
  return new WeComApiFailure(status, errcode ?? -1, typeof fields.errmsg === "string" ? fields.errmsg : `HTTP ${status}`);
}

/** 45009: API frequency over the limit; 45033: too many concurrent calls; 45011: API minute limit. */
const RATE_LIMITED = new Set([45009, 45033, 45011]);
/** 60020: the server's IP is not among the application's trusted IPs (可信IP); 48002: API forbidden; 301002: no rights. */
const FORBIDDEN = new Set([60020, 48002, 60011, 301002, 40013, 40091, 40056]);
/** The user or chat does not exist or is out of the application's visible range. */
const NOT_FOUND = new Set([60111, 81013, 86003, 40003, 40007, 86001]);
/** 45002: content too long. */
const TOO_LONG = new Set([45002]);
/** 40008: the message type (markdown) was refused: sent again as plain text it may pass. */
const FORMATTING = new Set([40008]);

function kindOf(failure: WeComApiFailure): ChannelErrorKind {
  const { status, errcode } = failure;
  if (status === 429 || RATE_LIMITED.has(errcode)) return "rate-limit";
  if (TOKEN_REFUSED.has(errcode) || errcode === 40013 || errcode === 40091) return "auth";
  if (FORBIDDEN.has(errcode) || status === 403) return "forbidden";
  if (NOT_FOUND.has(errcode) || status === 404) return "not-found";
  if (TOO_LONG.has(errcode)) return "too-long";
  if (FORMATTING.has(errcode)) return "formatting";
  // -1: system busy, worth another try like a 5xx.
  if (status >= 500 || errcode === -1) return "network";
  return "other";
}

const hints: Record<number, string> = {
  60020: " (add the gateway's public IP to the application's trusted IPs, 可信IP)",
  40013: " (check corpId)",
  40091: " (check the application's Secret)",
  40001: " (check the application's Secret)",
};

/** The scrubber of one application: its Secret, the query values that carry credentials, and each access token as it is issued. */
export type WeComScrubber = IssuedSecretScrubber;

export function createWeComScrubber(secrets: ReadonlyArray<string | undefined>): WeComScrubber {
  return createIssuedSecretScrubber(secrets, [/\b(access_token|corpsecret)=[^&\s"']+/]);
}

/** Maps whatever `operation` threw onto a ChannelError without a secret in it. */
export function toChannelError(error: unknown, operation: string, scrub: Scrub): ChannelError {
  if (error instanceof ChannelError) return error;
  // The robot SDK rejects with WeCom's acknowledgement frame itself: `{headers, errcode, errmsg}`.
  if (typeof error === "object" && error !== null && !(error instanceof Error) && typeof (error as { errcode?: unknown }).errcode === "number") {
    const { errcode, errmsg } = error as { errcode: number; errmsg?: unknown };
    error = new WeComApiFailure(200, errcode, typeof errmsg === "string" ? errmsg : "");
  }
  if (error instanceof WeComApiFailure) {
    const kind = kindOf(error);
    const message = scrub(`wecom ${operation} failed: errcode ${error.errcode} ${error.message}${hints[error.errcode] ?? ""}`.trim());
    return new ChannelError(message, CHANNEL, {
      kind,
      cause: new WeComApiFailure(error.status, error.errcode, scrub(error.message)),
      ...(kind === "rate-limit" ? { retryAfterMs: RETRY_AFTER_MS } : {}),
    });
  }
  return transportFailure(error, CHANNEL, operation, scrub);
}
