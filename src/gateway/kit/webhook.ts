/**
 * What every platform's HTTP callback needs, the same way: its secret compared in constant time,
 * a header read whatever the server's shape, and the body parsed as JSON and checked against the
 * platform's zod schema with one line naming the first bad field. Verify first, parse second:
 * these run after the signature check, never before it.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { z } from "zod";
import { describeIssue, formatPath, safeParseReporting } from "../../config/issues.js";

/** Equal-length digests, so neither the content nor the length of the secret leaks through timing. */
export function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** One header's value (the first, when repeated), from Node's headers or a fetch `Headers`. */
export function headerValue(headers: IncomingHttpHeaders | Headers | Record<string, string | string[] | undefined>, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() === wanted) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

export type BodyCheck<T> = { success: true; data: T } | { success: false; error: string };

/**
 * A raw body (bytes or text; an object is taken as already parsed) as JSON, checked against
 * `schema`: the data, or one line naming what is wrong (`body: expected JSON`,
 * `message.chat.id: expected a number, got "x"`).
 */
export function checkJsonBody<Schema extends z.ZodType>(schema: Schema, body: unknown, root = "body"): BodyCheck<z.output<Schema>> {
  let value = body;
  if (typeof body === "string" || body instanceof Uint8Array) {
    try {
      value = JSON.parse(typeof body === "string" ? body : Buffer.from(body).toString("utf8")) as unknown;
    } catch {
      return { success: false, error: `${root}: expected JSON` };
    }
  }
  const result = safeParseReporting(schema, value);
  if (result.success) return { success: true, data: result.data };
  const issue = result.error.issues[0]!;
  const field = issue.path.length === 0 ? root : formatPath(issue.path);
  return { success: false, error: `${field}: ${describeIssue(issue, { schema })}` };
}
