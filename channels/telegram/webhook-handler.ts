/**
 * The webhook endpoint, independent of any HTTP framework: `(headers, body) → { status }`.
 * Telegram sends the secret given to setWebhook in `X-Telegram-Bot-Api-Secret-Token`; it is checked
 * in constant time before the body is even read. A missing secret answers 401, a wrong one 403,
 * and neither publishes anything. Telegram retries any non-2xx answer, which is what a failure to
 * hand the update on (500) or a stopping adapter (503) want.
 */
import type { Logger } from "pino";
import { errorMessage } from "../../src/errors.js";
import { checkJsonBody, headerValue, sameSecret } from "../../src/gateway/kit/index.js";
import { type TelegramUpdate, TelegramUpdateSchema } from "./update-schema.js";

export const SECRET_HEADER = "x-telegram-bot-api-secret-token";

/** Node's IncomingHttpHeaders, a plain record, or a fetch Headers object. */
export type WebhookHeaders = Record<string, string | string[] | undefined> | Headers;

export interface WebhookResult {
  status: number;
  /** Why the request was refused, for the response body. */
  error?: string;
}

/** Takes the request headers and the body: parsed JSON, or the raw text/bytes. */
export type WebhookHandler = (headers: WebhookHeaders, body: unknown) => Promise<WebhookResult>;

export interface WebhookHandlerOptions {
  secret: string;
  /** Whether the adapter runs; otherwise 503 (Telegram tries again later). */
  accepting(): boolean;
  /** Hands a valid update on; resolves when it was published. */
  handle(update: TelegramUpdate): Promise<void>;
  logger: Logger;
}

export function createWebhookHandler(options: WebhookHandlerOptions): WebhookHandler {
  if (options.secret.length === 0) throw new Error("the Telegram webhook needs a secret");
  return async (headers, body) => {
    const given = headerValue(headers, SECRET_HEADER);
    if (given === undefined || given === "") return { status: 401, error: "missing secret token" };
    if (!sameSecret(given, options.secret)) {
      options.logger.warn({ channel: "telegram" }, "telegram webhook refused: wrong secret token");
      return { status: 403, error: "wrong secret token" };
    }
    if (!options.accepting()) return { status: 503, error: "not running" };
    const result = checkJsonBody(TelegramUpdateSchema, body);
    if (!result.success) return { status: 400, error: result.error };
    try {
      await options.handle(result.data);
      return { status: 200 };
    } catch (error) {
      options.logger.error({ channel: "telegram", updateId: result.data.update_id, error: errorMessage(error) }, "telegram webhook update failed");
      return { status: options.accepting() ? 500 : 503, error: "update not handled" };
    }
  };
}
