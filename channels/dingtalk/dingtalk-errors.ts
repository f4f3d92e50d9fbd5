/**
 * DingTalk's failures, normalized into ChannelError. The OpenAPI (`api.dingtalk.com/v1.0`) answers
 * a failure with an HTTP status and `{code, message}` (`Forbidden.AccessDenied.QpsLimitForApi`,
 * `InvalidAuthentication`, …); the older robot endpoints (the session webhook) answer HTTP 200 with
 * `{errcode, errmsg}`. {@link failureOf} reads both, {@link toChannelError} maps them (and transport
 * failures) onto the kinds the dispatcher acts on. No message leaves here unscrubbed: the app
 * secret, the access tokens made from it, session webhook URLs and Stream tickets are replaced.
 */
import { ChannelError, type ChannelErrorKind } from "../../src/errors.js";
import { type IssuedSecretScrubber, type Scrub, createIssuedSecretScrubber, transportFailure } from "../../src/gateway/kit/index.js";
import { retryAfter } from "./quotas.js";

const CHANNEL = "dingtalk";

/** A DingTalk answer that said no, before it is mapped. */
export class DingTalkApiFailure extends Error {
  override name = "DingTalkApiFailure";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** The failure an answer stands for, if it is one: a non-2xx status, or a 200 whose `errcode` is not 0. */
export function failureOf(status: number, body: unknown, retryAfter?: string | null): DingTalkApiFailure | undefined {
  const fields = typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {};
  const errcode = typeof fields.errcode === "number" ? fields.errcode : undefined;
  const seconds = Number(retryAfter);
  const retryAfterMs = retryAfter && Number.isFinite(seconds) && seconds >= 0 ? Math.max(seconds * 1000, 100) : undefined;
  if (status >= 200 && status < 300 && (errcode === undefined || errcode === 0)) return undefined;
  const code = typeof fields.code === "string" ? fields.code : errcode !== undefined ? String(errcode) : String(status);
  const message = typeof fields.message === "string" ? fields.message : typeof fields.errmsg === "string" ? fields.errmsg : "";
  return new DingTalkApiFailure(status, code, message, retryAfterMs);
}

const rateLimitCode = /QpsLimit|Throttl|FlowControl|TooManyRequests/i;
/** 130101: send too fast; 88 and 410100: the robot's sending is limited. */
const rateLimitErrcodes = new Set(["130101", "88", "410100"]);
const notFoundCode = /NotFound|NotExist|invalidStaffId/i;

function kindOf(failure: DingTalkApiFailure): ChannelErrorKind {
  const { status, code } = failure;
  if (status === 429 || rateLimitCode.test(code) || rateLimitErrcodes.has(code)) return "rate-limit";
  if (status === 404 || (status !== 403 && notFoundCode.test(code))) return "not-found";
  if (status === 403 || /Forbidden|NoPermission|AccessDenied/i.test(code)) return "forbidden";
  if (status === 400 && /too long|length/i.test(failure.message)) return "too-long";
  if (status === 400 && /msgParam|markdown/i.test(`${code} ${failure.message}`)) return "formatting";
  // -1: "system busy", worth another try like a 5xx.
  if (status >= 500 || code === "-1") return "network";
  return "other";
}

function retryAfterOf(failure: DingTalkApiFailure): number {
  if (failure.retryAfterMs !== undefined) return failure.retryAfterMs;
  return failure.code === "130101" ? retryAfter.sendTooFastMs : retryAfter.qpsMs;
}

/** The scrubber of one app: its secret, the session-webhook and Stream-ticket query values, and each access token as it is issued. */
export type DingTalkScrubber = IssuedSecretScrubber;

export function createDingTalkScrubber(secrets: ReadonlyArray<string | undefined>): DingTalkScrubber {
  return createIssuedSecretScrubber(secrets, [/\b(session|ticket|access_token)=[^&\s"']+/]);
}

/** Maps whatever `operation` threw (a failure answer, fetch, our own checks) onto a ChannelError without a secret in it. */
export function toChannelError(error: unknown, operation: string, scrub: Scrub): ChannelError {
  if (error instanceof ChannelError) return error;
  if (error instanceof DingTalkApiFailure) {
    const kind = kindOf(error);
    const hint = error.status === 401 ? " (the app key and secret, or the token made from them, were refused)" : "";
    const message = scrub(`dingtalk ${operation} failed: ${error.status} ${error.code} ${error.message}${hint}`.trim());
    return new ChannelError(message, CHANNEL, {
      kind,
      cause: new DingTalkApiFailure(error.status, error.code, scrub(error.message), error.retryAfterMs),
      ...(kind === "rate-limit" ? { retryAfterMs: retryAfterOf(error) } : {}),
    });
  }
  return transportFailure(error, CHANNEL, operation, scrub);
}
