/**
 * The webhook endpoint, independent of any HTTP framework: `(headers, body) → { status }`.
 * Telegram sends the secret given to setWebhook in `X-Telegram-Bot-Api-Secret-Token`; it is checked
 * in constant time before the body is even read. A missing secret answers 401, a wrong one 403,
 * and neither publishes anything. Telegram retries any non-2xx answer, which is what a failure to
 * hand the update on (500) or a stopping adapter (503) want.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { Logger } from "pino";
import { describeIssue, formatPath, safeParseReporting } from "../../src/config/issues.js";
import { errorMessage } from "../../src/errors.js";
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

function headerValue(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

/** Equal-length digests, so neither the content nor the length of the secret leaks through timing. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();
  return timingSafeEqual(digest(given), digest(expected));
}

function parseBody(body: unknown): { value: unknown } | { error: string } {
  if (typeof body !== "string" && !(body instanceof Uint8Array)) return { value: body };
  const text = typeof body === "string" ? body : Buffer.from(body).toString("utf8");
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return { error: "body: expected JSON" };
  }
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
    const parsed = parseBody(body);
    if ("error" in parsed) return { status: 400, error: parsed.error };
    const result = safeParseReporting(TelegramUpdateSchema, parsed.value);
    if (!result.success) {
      const issue = result.error.issues[0]!;
      const field = issue.path.length === 0 ? "body" : formatPath(issue.path);
      return { status: 400, error: `${field}: ${describeIssue(issue)}` };
    }
    try {
      await options.handle(result.data);
      return { status: 200 };
    } catch (error) {
      options.logger.error({ channel: "telegram", updateId: result.data.update_id, error: errorMessage(error) }, "telegram webhook update failed");
      return { status: options.accepting() ? 500 : 503, error: "update not handled" };
    }
  };
}
