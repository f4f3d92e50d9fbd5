/**
 * The Events API over HTTP (`mode: "http"`): Slack posts events (JSON) and slash commands (a form)
 * to the Request URL, each signed: `X-Slack-Signature: v0=<hex>`, the HMAC-SHA256 of
 * `v0:<X-Slack-Request-Timestamp>:<raw body>` keyed with the signing secret. In order, before the
 * body is parsed:
 *
 * 1. the signature must equal ours (compared in constant time) and the timestamp be within five
 *    minutes of our clock (Slack's advice, against replays). Otherwise 401;
 * 2. the body must be what Slack sends (400 naming the first bad field); a URL check is answered
 *    with its challenge by any gateway;
 * 3. a running adapter (503 while stopped or not leading: Slack tries again);
 * 4. an event or a command is handed on (the inbound
 *    queue never waits for the sink) and answered 200 at once, within Slack's 3 s. Slack retries
 *    an event it saw no 200 for (`X-Slack-Retry-Num`, up to three times): it dedupes.
 */
import { createHmac } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Logger } from "pino";
import type { z } from "zod";
import { checkJsonBody, headerValue, sameSecret } from "../../src/gateway/kit/index.js";
import { type EventCallback, HttpBodySchema, type SlashCommand, SlashCommandSchema } from "./payloads.js";

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
  signingSecret: string;
  accepting(): boolean;
  /** Takes a verified event; never waits for the sink. */
  onEvent(callback: EventCallback, retryAttempt: number | undefined): void;
  /** Takes a verified slash command; resolves with the acknowledgement's body. */
  onCommand(command: SlashCommand): Record<string, unknown>;
  logger: Logger;
  now?: () => number;
  /** How far the timestamp may be from our clock. Default 5 minutes. */
  toleranceMs?: number;
}

/** Slack's signature of a request: `v0=` and the hex HMAC-SHA256 of `v0:<timestamp>:<body>`. */
export function signatureOf(timestamp: string, rawBody: Buffer | string, signingSecret: string): string {
  return `v0=${createHmac("sha256", signingSecret).update(`v0:${timestamp}:`).update(rawBody).digest("hex")}`;
}

const refused = (reason: string): CallbackResponse => ({ status: 401, body: { error: reason } });

export function createCallbackHandler(options: CallbackHandlerOptions): CallbackHandler {
  const { signingSecret, logger } = options;
  const now = options.now ?? Date.now;
  const toleranceMs = options.toleranceMs ?? 5 * 60_000;

  function problemOf(headers: IncomingHttpHeaders, rawBody: Buffer): string | undefined {
    const timestamp = headerValue(headers, "x-slack-request-timestamp") ?? "";
    const signature = headerValue(headers, "x-slack-signature") ?? "";
    if (!sameSecret(signature, signatureOf(timestamp, rawBody, signingSecret))) return "bad signature";
    if (!/^\d{1,12}$/.test(timestamp) || Math.abs(now() - Number(timestamp) * 1000) > toleranceMs) return "stale request";
    return undefined;
  }

  function command(rawBody: Buffer): CallbackResponse {
    const form = Object.fromEntries(new URLSearchParams(rawBody.toString("utf8")));
    // An interactive payload (a button): nothing of the bot's has any, acknowledged and skipped.
    if (typeof form.payload === "string") return { status: 200, body: {} };
    const parsed = checkJsonBody(SlashCommandSchema, form, "form");
    if (!parsed.success) {
      logger.warn({ channel: "slack", error: parsed.error }, "slack command not understood");
      return { status: 400, body: { error: parsed.error } };
    }
    return { status: 200, body: options.onCommand(parsed.data) };
  }

  return async ({ headers, rawBody }) => {
    const problem = problemOf(headers, rawBody);
    if (problem) {
      logger.warn({ channel: "slack", reason: problem }, "slack request refused");
      return refused(problem);
    }
    const form = (headerValue(headers, "content-type") ?? "").startsWith("application/x-www-form-urlencoded");
    if (!form) {
      const parsed = checkJsonBody(HttpBodySchema, rawBody);
      if (!parsed.success) {
        logger.warn({ channel: "slack", error: parsed.error }, "slack event not understood");
        return { status: 400, body: { error: parsed.error } };
      }
      // The console's URL check is answered by any gateway, leading or not.
      if (parsed.data.type === "url_verification") return { status: 200, body: { challenge: parsed.data.challenge } };
      if (!options.accepting()) return { status: 503, body: { error: "not running" } };
      return callback(parsed.data, headers);
    }
    if (!options.accepting()) return { status: 503, body: { error: "not running" } };
    return command(rawBody);
  };

  function callback(body: Exclude<z.output<typeof HttpBodySchema>, { type: "url_verification" }>, headers: IncomingHttpHeaders): CallbackResponse {
    if (body.type === "app_rate_limited") {
      logger.warn({ channel: "slack" }, "slack is holding events back: the app received more than 30,000 in an hour");
      return { status: 200, body: {} };
    }
    const retry = Number(headerValue(headers, "x-slack-retry-num") ?? Number.NaN);
    options.onEvent(body, Number.isInteger(retry) ? retry : undefined);
    return { status: 200, body: {} };
  }
}
