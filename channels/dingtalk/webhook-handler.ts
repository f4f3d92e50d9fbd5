/**
 * The HTTP callback (`mode: "http"`): DingTalk posts each robot message to the gateway with two
 * headers, `timestamp` (ms) and `sign`, the Base64 HMAC-SHA256 of `timestamp + "\n" + appSecret`
 * keyed with the appSecret. In order, before the body is parsed:
 *
 * 1. `sign` must equal ours (compared in constant time; a URL-encoded one is accepted) and
 *    `timestamp` be within an hour of our clock, as DingTalk's documentation says. Otherwise 401;
 * 2. a running adapter (503 while stopped, and DingTalk tries again later);
 * 3. the body must be a robot message (400 naming the first bad field);
 * 4. the message is handed on, and answered 200 once it was taken, 500 when it could not be.
 *
 * The signature covers the timestamp, not the body: within the hour a captured request could be
 * replayed with another body. Serve the callback over HTTPS only; the Stream mode has no such window.
 */
import { createHmac } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Logger } from "pino";
import { errorMessage } from "../../src/errors.js";
import { checkJsonBody, headerValue, sameSecret } from "../../src/gateway/kit/index.js";
import { type RobotMessage, RobotMessageSchema } from "./robot-message.js";

export interface CallbackRequest {
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
}

export interface CallbackResponse {
  status: number;
  body?: unknown;
}

export type CallbackHandler = (request: CallbackRequest) => Promise<CallbackResponse>;

export interface CallbackHandlerOptions {
  appSecret: string;
  accepting(): boolean;
  /** Hands a verified message on; resolves once it was taken. */
  handle(message: RobotMessage): Promise<void>;
  logger: Logger;
  now?: () => number;
  /** How far the timestamp may be from our clock. Default an hour. */
  toleranceMs?: number;
}

/** DingTalk's signature of a timestamp. */
export function signatureOf(timestamp: string, appSecret: string): string {
  return createHmac("sha256", appSecret).update(`${timestamp}\n${appSecret}`).digest("base64");
}

const refused = (reason: string): CallbackResponse => ({ status: 401, body: { error: reason } });

export function createCallbackHandler(options: CallbackHandlerOptions): CallbackHandler {
  const { appSecret, logger } = options;
  const now = options.now ?? Date.now;
  const toleranceMs = options.toleranceMs ?? 60 * 60_000;

  function problemOf(headers: IncomingHttpHeaders): string | undefined {
    const timestamp = headerValue(headers, "timestamp") ?? "";
    let sign = headerValue(headers, "sign") ?? "";
    if (sign.includes("%")) {
      try {
        sign = decodeURIComponent(sign);
      } catch {
        return "bad signature";
      }
    }
    if (!sameSecret(sign, signatureOf(timestamp, appSecret))) return "bad signature";
    if (!/^\d{1,15}$/.test(timestamp) || Math.abs(now() - Number(timestamp)) > toleranceMs) return "stale request";
    return undefined;
  }

  return async ({ headers, rawBody }) => {
    const problem = problemOf(headers);
    if (problem) {
      logger.warn({ channel: "dingtalk", reason: problem }, "dingtalk callback refused");
      return refused(problem);
    }
    if (!options.accepting()) return { status: 503, body: { error: "not running" } };
    const parsed = checkJsonBody(RobotMessageSchema, rawBody);
    if (!parsed.success) {
      logger.warn({ channel: "dingtalk", error: parsed.error }, "dingtalk callback body not understood");
      return { status: 400, body: { error: parsed.error } };
    }
    try {
      await options.handle(parsed.data);
      return { status: 200, body: {} };
    } catch (error) {
      logger.error({ channel: "dingtalk", error: errorMessage(error) }, "dingtalk callback message not taken");
      return { status: options.accepting() ? 500 : 503, body: { error: "message not taken" } };
    }
  };
}
