/**
 * The application callback (API接收消息). WeCom calls the URL with `msg_signature`, `timestamp` and
 * `nonce` in the query:
 *
 * - GET, to verify the URL when the admin saves it, with `echostr`: the signature over the echostr
 *   must match, and the answer is the echostr decrypted, as plain text;
 * - POST, with each message: in order, before anything of the body is parsed:
 *   1. the `Encrypt` field is taken by one strict pattern (400 when there is none);
 *   2. the signature over it must match (401), and the timestamp be within `toleranceMs` of our
 *      clock (401: a captured callback cannot be replayed later);
 *   3. a running adapter (503 while stopped: WeCom tries again);
 *   4. the envelope is decrypted and must name our corp (401), the message XML parsed (400);
 *   5. the message is handed on WITHOUT waiting, and the callback answered with an empty 200 at
 *      once: WeCom calls again when it has no answer within 5 s (three times in all), and those
 *      retries dedupe on the MsgId.
 */
import type { Logger } from "pino";
import { errorMessage } from "../../src/errors.js";
import { CallbackRefusal, openEnvelope, signatureMatches } from "./callback-crypto.js";
import { type AppMessage, encryptedField, parseAppMessage } from "./callback-xml.js";

export interface CallbackRequest {
  method: "GET" | "POST";
  query: URLSearchParams;
  rawBody: Buffer;
}

export interface CallbackResponse {
  status: number;
  /** Plain text (the echostr, or nothing). */
  body: string;
}

export type CallbackHandler = (request: CallbackRequest) => Promise<CallbackResponse>;

export interface CallbackHandlerOptions {
  corpId: string;
  token: string;
  encryptKey: string;
  accepting(): boolean;
  /** Takes a verified message; not awaited by the callback. */
  handle(message: AppMessage): Promise<void>;
  logger: Logger;
  now?: () => number;
  /** How far the timestamp may be from our clock. Default an hour. */
  toleranceMs?: number;
  /** Seams for tests: what decrypts and what parses, so a test can prove neither ran. */
  open?: typeof openEnvelope;
  parse?: typeof parseAppMessage;
}

const answer = (status: number, body = ""): CallbackResponse => ({ status, body });

export function createCallbackHandler(options: CallbackHandlerOptions): CallbackHandler {
  const { logger, token } = options;
  const now = options.now ?? Date.now;
  const toleranceMs = options.toleranceMs ?? 60 * 60_000;
  const open = options.open ?? openEnvelope;
  const parse = options.parse ?? parseAppMessage;

  function refused(reason: string): CallbackResponse {
    logger.warn({ channel: "wecom", reason }, "wecom callback refused");
    return answer(401, reason);
  }

  /** The signature and timestamp checks of both methods; the problem, if any. */
  function problemOf(query: URLSearchParams, encrypted: string): string | undefined {
    const timestamp = query.get("timestamp") ?? "";
    const signature = query.get("msg_signature") ?? "";
    if (!signatureMatches(token, timestamp, query.get("nonce") ?? "", encrypted, signature)) return "bad signature";
    if (!/^\d{1,12}$/.test(timestamp) || Math.abs(now() - Number(timestamp) * 1000) > toleranceMs) return "stale timestamp";
    return undefined;
  }

  function verifyUrl(query: URLSearchParams): CallbackResponse {
    // Base64 has no spaces: a `+` the caller left unencoded was read as one.
    const echo = query.get("echostr")?.replace(/ /g, "+");
    if (!echo) return answer(400, "echostr: missing");
    const problem = problemOf(query, echo);
    if (problem) return refused(problem);
    try {
      return answer(200, open(options.encryptKey, echo, options.corpId));
    } catch (error) {
      return refused(error instanceof CallbackRefusal ? error.message : "echostr not decrypted");
    }
  }

  return async ({ method, query, rawBody }) => {
    if (method === "GET") return verifyUrl(query);
    const encrypted = encryptedField(rawBody.toString("utf8"));
    if (!encrypted) return answer(400, "body: no Encrypt field");
    const problem = problemOf(query, encrypted);
    if (problem) return refused(problem);
    if (!options.accepting()) return answer(503, "not running");
    let xml: string;
    try {
      xml = open(options.encryptKey, encrypted, options.corpId);
    } catch (error) {
      return refused(error instanceof CallbackRefusal ? error.message : "not decrypted");
    }
    const parsed = parse(xml);
    if (!parsed.success) {
      logger.warn({ channel: "wecom", error: parsed.error }, "wecom callback message not understood");
      return answer(400, parsed.error);
    }
    void options.handle(parsed.data).catch((error: unknown) => {
      logger.error({ channel: "wecom", error: errorMessage(error) }, "wecom message not taken; WeCom's retry may bring it again");
    });
    return answer(200);
  };
}
