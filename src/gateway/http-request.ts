/**
 * Request input is parsed once, at the edge, with zod. A bad value answers 400 with one line that
 * names the field: `{ "error": "content: expected a string, but it is missing" }`.
 */
import type { z } from "zod";
import { describeIssue, formatPath, safeParseReporting } from "../config/issues.js";

/** A request the API refuses. The server's error handler turns it into `{ error }` with `statusCode`. */
export class RequestError extends Error {
  override name = "RequestError";
  constructor(
    message: string,
    readonly statusCode = 400,
  ) {
    super(message);
  }
}

/**
 * Parses `value` (a body, params or query) or throws a RequestError naming the first bad field.
 * `root` names the value itself when it is wrong as a whole (e.g. `body: expected an object`).
 */
export function parseRequest<Schema extends z.ZodType>(schema: Schema, value: unknown, root: string): z.output<Schema> {
  const result = safeParseReporting(schema, value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.length === 0 ? root : formatPath(issue.path);
  throw new RequestError(`${field}: ${describeIssue(issue, { schema })}`);
}
