/**
 * The webhook endpoint (`mode: "webhook"`), independent of any HTTP framework: `{headers, rawBody}
 * → {status, body}`. Nothing of the SDK's webhook adapter is used: it answers 200 with an empty
 * body on a bad signature, and throws "bad decrypt" (an unhandled rejection) on a body encrypted
 * with another key.
 *
 * In order, before anything is parsed or published:
 * 1. the signature: `X-Lark-Signature` must be the SHA-256 hex of timestamp + nonce + encrypt key
 *    + raw body (compared in constant time), and `X-Lark-Request-Timestamp` within five minutes of
 *    our clock. A wrong or stale signature is 401;
 * 2. the body is decrypted (AES-256-CBC, key SHA-256(encrypt key), IV the first 16 bytes); one
 *    that does not decrypt is 401;
 * 3. an unsigned request is taken only when it is the `url_verification` challenge and proves the
 *    key another way: it decrypted, or it carries the verification token. Everything else
 *    unsigned is 401;
 * 4. with a verification token configured, the body's token must match it (401 otherwise);
 * 5. the challenge is answered `{challenge}`; an event is handed on and answered 200 once it was
 *    published (or the ack budget ran out, see the adapter), 500 when publishing failed, so that
 *    Feishu delivers it again.
 */
import { createDecipheriv, createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Logger } from "pino";
import { errorMessage } from "../../src/errors.js";
import { headerValue, sameSecret } from "../../src/gateway/kit/index.js";
import { flattenEnvelope } from "./event-schema.js";

export interface WebhookRequest {
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
}

export interface WebhookResponse {
  status: number;
  body?: unknown;
}

export interface WebhookHandlerOptions {
  encryptKey: string;
  verificationToken?: string;
  /** Whether the adapter runs; otherwise 503 (Feishu tries again later). */
  accepting(): boolean;
  /** Hands a verified event (flattened: header and event fields together) on. */
  handle(event: Record<string, unknown>): Promise<void>;
  logger: Logger;
  /** Clock, ms. Default Date.now. */
  now?: () => number;
  /** How far the timestamp may be from our clock. Default 300 s. */
  toleranceMs?: number;
}

export type WebhookHandler = (request: WebhookRequest) => Promise<WebhookResponse>;

export function decrypt(encrypted: string, encryptKey: string): string {
  const key = createHash("sha256").update(encryptKey).digest();
  const bytes = Buffer.from(encrypted, "base64");
  if (bytes.length < 32 || bytes.length % 16 !== 0) throw new Error("not an AES-256-CBC body");
  const decipher = createDecipheriv("aes-256-cbc", key, bytes.subarray(0, 16));
  return Buffer.concat([decipher.update(bytes.subarray(16)), decipher.final()]).toString("utf8");
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

const refused = (reason: string): WebhookResponse => ({ status: 401, body: { error: reason } });

export function createWebhookHandler(options: WebhookHandlerOptions): WebhookHandler {
  const { encryptKey, verificationToken, logger } = options;
  if (!encryptKey) throw new Error("the Feishu webhook needs an encrypt key");
  const now = options.now ?? Date.now;
  const toleranceMs = options.toleranceMs ?? 300_000;

  function signatureProblem(headers: IncomingHttpHeaders, rawBody: Buffer): string | undefined {
    const timestamp = headerValue(headers, "x-lark-request-timestamp") ?? "";
    const nonce = headerValue(headers, "x-lark-request-nonce") ?? "";
    const signature = headerValue(headers, "x-lark-signature") ?? "";
    const expected = createHash("sha256").update(timestamp + nonce + encryptKey).update(rawBody).digest("hex");
    if (!sameSecret(signature.toLowerCase(), expected)) return "bad signature";
    const seconds = Number(timestamp);
    if (!/^\d+$/.test(timestamp) || Math.abs(now() - seconds * 1000) > toleranceMs) return "stale request";
    return undefined;
  }

  return async ({ headers, rawBody }) => {
    const signed = headerValue(headers, "x-lark-signature") !== undefined;
    if (signed) {
      const problem = signatureProblem(headers, rawBody);
      if (problem) {
        logger.warn({ channel: "feishu", reason: problem }, "feishu webhook refused");
        return refused(problem);
      }
    }
    let body = parseObject(rawBody.toString("utf8"));
    if (!body) return signed ? { status: 400, body: { error: "body: expected a JSON object" } } : refused("unsigned request");
    const encrypted = typeof body.encrypt === "string";
    if (encrypted) {
      try {
        body = parseObject(decrypt(body.encrypt as string, encryptKey));
      } catch {
        body = undefined;
      }
      if (!body) {
        logger.warn({ channel: "feishu", reason: "does not decrypt" }, "feishu webhook refused");
        return refused("body does not decrypt with the encrypt key");
      }
    }
    const challenge = body.type === "url_verification";
    const token = typeof body.token === "string" ? body.token : typeof (body.header as { token?: unknown } | undefined)?.token === "string" ? ((body.header as { token: string }).token) : undefined;
    const tokenMatches = verificationToken !== undefined && token !== undefined && sameSecret(token, verificationToken);
    if (!signed && !(challenge && (encrypted || tokenMatches))) {
      logger.warn({ channel: "feishu", reason: "unsigned" }, "feishu webhook refused");
      return refused("unsigned request");
    }
    if (verificationToken !== undefined && !tokenMatches) {
      logger.warn({ channel: "feishu", reason: "verification token" }, "feishu webhook refused");
      return refused("wrong verification token");
    }
    if (challenge) return { status: 200, body: { challenge: body.challenge } };
    if (!options.accepting()) return { status: 503, body: { error: "not running" } };
    try {
      await options.handle(flattenEnvelope(body));
      return { status: 200, body: {} };
    } catch (error) {
      logger.error({ channel: "feishu", error: errorMessage(error) }, "feishu webhook event not handled");
      return { status: options.accepting() ? 500 : 503, body: { error: "event not handled" } };
    }
  };
}
