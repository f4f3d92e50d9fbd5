/**
 * How the open platforms' JSON APIs are called over fetch (DingTalk, QQ): one request with a
 * timeout, and the answer read as JSON whatever it holds. A refusal often comes as an HTML page or
 * an empty body; reading it never throws, so the caller can map the status and body to a
 * ChannelError that says what the platform said.
 */

/** What a JSON call answered: its status, its body as JSON and its Retry-After header. */
export interface JsonAnswer {
  status: number;
  body: unknown;
  retryAfter: string | null;
}

/** One request that gives up after `timeoutMs`; any status is an answer (the caller judges it). */
export async function requestJson(url: string, init: RequestInit, timeoutMs: number): Promise<JsonAnswer> {
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  return { status: response.status, body: await readJsonBody(response), retryAfter: response.headers.get("retry-after") };
}

/** An answer's body as JSON: `{}` when empty, `{ message }` with its first 200 characters when it is not JSON. */
export async function readJsonBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { message: text.slice(0, 200) };
  }
}
