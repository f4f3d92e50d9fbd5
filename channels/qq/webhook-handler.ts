/**
 * The webhook mode: QQ posts every event to the callback address with `X-Signature-Ed25519` (hex)
 * and `X-Signature-Timestamp`, an Ed25519 signature of `timestamp + body` made with the bot's key,
 * whose 32-byte seed is the AppSecret repeated until it is long enough. In order, before the body
 * is parsed:
 *
 * 1. the signature must verify against our public key, and the timestamp be within
 *    `toleranceSeconds` of our clock. Otherwise 401: nothing of the body is read;
 * 2. the body must be a payload (400 naming the first bad field);
 * 3. op 13, the callback address validation QQ runs when the address is saved in its console:
 *    answered with `{plain_token, signature}`, the signature of `event_ts + plain_token`. Only a
 *    signed request gets it, so the endpoint never signs what a stranger chose;
 * 4. op 0, an event: 503 while the channel is stopped (QQ tries again), a message event handed on
 *    and answered op 12 once taken (500 when it could not be), any other event acknowledged.
 */
import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Logger } from "pino";
import { errorMessage } from "../../src/errors.js";
import { checkJsonBody, headerValue } from "../../src/gateway/kit/index.js";
import { type MessageEventType, type Payload, PayloadSchema, isMessageEvent } from "./events.js";

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
  /** Hands a verified message event on; resolves once it was taken. */
  handle(type: MessageEventType, eventId: string | undefined, data: unknown): Promise<void>;
  logger: Logger;
  now?: () => number;
  toleranceSeconds: number;
}

/** The prefix that makes a raw 32-byte Ed25519 seed a PKCS#8 private key. */
const PKCS8_ED25519 = Buffer.from("302e020100300506032b657004220420", "hex");

/** The bot's Ed25519 key, from its AppSecret as QQ derives it. */
export function keyOfSecret(appSecret: string): { privateKey: KeyObject; publicKey: KeyObject } {
  let seed = appSecret;
  while (Buffer.byteLength(seed) < 32) seed = seed.repeat(2);
  const privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, Buffer.from(seed).subarray(0, 32)]), format: "der", type: "pkcs8" });
  return { privateKey, publicKey: createPublicKey(privateKey) };
}

/** Hex Ed25519 signature of `message` with the bot's key. */
export function signWith(privateKey: KeyObject, message: string | Buffer): string {
  return sign(null, Buffer.isBuffer(message) ? message : Buffer.from(message), privateKey).toString("hex");
}

const refused = (reason: string): CallbackResponse => ({ status: 401, body: { error: reason } });

export function createCallbackHandler(options: CallbackHandlerOptions): CallbackHandler {
  const { logger } = options;
  const now = options.now ?? Date.now;
  const { privateKey, publicKey } = keyOfSecret(options.appSecret);

  function problemOf(headers: IncomingHttpHeaders, rawBody: Buffer): string | undefined {
    const signature = headerValue(headers, "x-signature-ed25519") ?? "";
    const timestamp = headerValue(headers, "x-signature-timestamp") ?? "";
    if (!/^[0-9a-f]{128}$/i.test(signature) || !/^\d{1,12}$/.test(timestamp)) return "bad signature";
    if (!verify(null, Buffer.concat([Buffer.from(timestamp), rawBody]), publicKey, Buffer.from(signature, "hex"))) return "bad signature";
    if (Math.abs(now() / 1000 - Number(timestamp)) > options.toleranceSeconds) return "stale request";
    return undefined;
  }

  async function onEvent(payload: Payload): Promise<CallbackResponse> {
    if (!options.accepting()) return { status: 503, body: { error: "not running" } };
    if (!isMessageEvent(payload.t)) return { status: 200, body: { op: 12, d: 0 } };
    try {
      await options.handle(payload.t, payload.id, payload.d);
      return { status: 200, body: { op: 12, d: 0 } };
    } catch (error) {
      logger.error({ channel: "qq", error: errorMessage(error) }, "qq callback event not taken");
      return { status: options.accepting() ? 500 : 503, body: { error: "event not taken" } };
    }
  }

  return async ({ headers, rawBody }) => {
    const problem = problemOf(headers, rawBody);
    if (problem) {
      logger.warn({ channel: "qq", reason: problem }, "qq callback refused");
      return refused(problem);
    }
    const parsed = checkJsonBody(PayloadSchema, rawBody);
    if (!parsed.success) {
      logger.warn({ channel: "qq", error: parsed.error }, "qq callback body not understood");
      return { status: 400, body: { error: parsed.error } };
    }
    const payload = parsed.data;
    if (payload.op === 13) {
      const { plain_token: plainToken, event_ts: eventTs } = (payload.d ?? {}) as { plain_token?: unknown; event_ts?: unknown };
      if (typeof plainToken !== "string" || typeof eventTs !== "string") return { status: 400, body: { error: "d.plain_token and d.event_ts: expected strings" } };
      logger.info({ channel: "qq" }, "qq callback address validated");
      return { status: 200, body: { plain_token: plainToken, signature: signWith(privateKey, `${eventTs}${plainToken}`) } };
    }
    if (payload.op === 0) return onEvent(payload);
    return { status: 200, body: { op: 12, d: 0 } };
  };
}
