/**
 * A POST whose answer is a server-sent event stream of JSON values, read as the OpenAI SDK's
 * `post(path, { stream: true })` reads it, and failing with the SDK's own error classes as its
 * client does, without the client's per-call layers.
 *
 * Those layers cost a worker about 0.1 ms of CPU per model call in the closed-loop bench (request
 * options merged and cloned, headers built twice, debug log details formatted whether or not
 * anything logs them, and the stream read through four nested async iterators): the call itself,
 * one request and one stream, is cheaper than the SDK's bookkeeping around it. The SDK stays the
 * source of the wire types and of every error a caller sees (APIError and its subclasses by
 * status, APIConnectionError), so ./sdk-errors.ts maps them as it maps the client's. The SSE
 * framing (fields, line endings, comments, events split across chunks) is eventsource-parser's.
 *
 * As the SDK's stream does: `data: [DONE]` ends it; an `error` event, or a value with an `error`
 * field, fails it with an APIError without status; data that is not JSON fails it. An error status
 * fails the request with the status's APIError, its JSON body (or text) in the error as the client
 * puts it.
 */
import OpenAI from "openai";
import { VERSION } from "openai/version";
import { createParser, type EventSourceMessage } from "eventsource-parser";

export interface SsePostRequest {
  url: string;
  /** Lower-case names; `authorization` and the caller's own among them. */
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal;
}

/** What the SDK's client sends besides the caller's headers (its User-Agent: servers that admit the SDK admit this). */
export const SDK_HEADERS: Readonly<Record<string, string>> = {
  accept: "application/json",
  "content-type": "application/json",
  "user-agent": `OpenAI/JS ${VERSION}`,
};

/** The request sent; resolves once the answer's status is in and good, to the stream's JSON values. */
export async function postForEvents(fetchImpl: typeof fetch, request: SsePostRequest): Promise<AsyncIterable<unknown>> {
  let response: Response;
  try {
    response = await fetchImpl(request.url, { method: "POST", headers: request.headers, body: request.body, signal: request.signal });
  } catch (error) {
    if (request.signal.aborted) throw new OpenAI.APIUserAbortError();
    throw new OpenAI.APIConnectionError({ cause: error instanceof Error ? error : new Error(String(error)) });
  }
  if (!response.ok) throw await statusError(response);
  if (!response.body) throw new OpenAI.APIError(undefined, undefined, "the server answered without a body", response.headers);
  return events(response.body as unknown as AsyncIterable<Uint8Array>, response);
}

/** The client's error for a status: its JSON body under `error` (wrapped when the server sent it bare), else the text as the message. */
async function statusError(response: Response): Promise<Error> {
  const text = await errorText(response).catch((error: unknown) => (error instanceof Error ? error.message : String(error)));
  const json = parseJson(text);
  const error = json && typeof json === "object" && (json as { error?: unknown }).error == null ? { error: json } : json;
  return OpenAI.APIError.generate(response.status, error as object | undefined, json === undefined ? clipped(text) : undefined, response.headers);
}

/** The most of an error text that is not JSON that becomes the message. */
const MAX_TEXT_MESSAGE = 500;

/** Text that is not JSON (a proxy's HTML page, say) as a message: whitespace runs made one space, the first MAX_TEXT_MESSAGE characters. */
function clipped(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > MAX_TEXT_MESSAGE ? `${flat.slice(0, MAX_TEXT_MESSAGE)}… (${flat.length} characters)` : flat;
}

/** The most of an error answer's body that is read (an error body is a few hundred bytes). */
const MAX_ERROR_BYTES = 64 * 1024;

/** An error answer's body as text, its first MAX_ERROR_BYTES at most (the rest is dropped with the request). */
async function errorText(response: Response): Promise<string> {
  if (!response.body) return "";
  const decoder = new TextDecoder();
  let text = "";
  let read = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    const kept = chunk.subarray(0, MAX_ERROR_BYTES - read);
    read += kept.byteLength;
    text += decoder.decode(kept, { stream: true });
    if (read >= MAX_ERROR_BYTES) {
      drop(response.body);
      break;
    }
  }
  return text + decoder.decode();
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * The most one event may take. A chunk's event is a few KB (a long answer or tool call comes in many
 * events); a server that streams without ever ending an event would otherwise be buffered until the
 * idle timer cuts it.
 */
const MAX_EVENT_BYTES = 8 * 1024 * 1024;

/**
 * The stream's JSON values. Ended by `[DONE]` or by the body's end, the body is left to end by
 * itself (its connection kept); stopped before that (the reader stopped, or a value failed), it is
 * destroyed, which drops the request as the SDK aborts it.
 */
async function* events(body: AsyncIterable<Uint8Array>, response: Pick<Response, "headers">): AsyncGenerator<unknown> {
  const pending: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => pending.push(event) });
  const decoder = new TextDecoder();
  const chunks = body[Symbol.asyncIterator]();
  let finished = false;
  // Bytes read since an event last came out: what the parser holds of one unfinished event.
  let unfinished = 0;
  try {
    for (let read = await chunks.next(); !read.done; read = await chunks.next()) {
      parser.feed(decoder.decode(read.value, { stream: true }));
      unfinished = pending.length > 0 ? 0 : unfinished + read.value.byteLength;
      if (unfinished > MAX_EVENT_BYTES) throw new Error(`an event of the stream passed ${MAX_EVENT_BYTES / 1024 / 1024} MiB without ending`);
      for (let event = pending.shift(); event !== undefined; event = pending.shift()) {
        if (event.data === "[DONE]") {
          finished = true;
          return;
        }
        yield eventValue(event, response);
      }
    }
    finished = true;
    parser.feed(decoder.decode());
    parser.reset({ consume: true });
    for (const event of pending) {
      if (event.data === "[DONE]") return;
      yield eventValue(event, response);
    }
  } finally {
    if (!finished) drop(body);
    await chunks.return?.();
  }
}

/** The event's JSON value, or the failure it reports (the answer's headers read only then). */
function eventValue(event: EventSourceMessage, response: Pick<Response, "headers">): unknown {
  const value = parseJson(event.data);
  if (value === undefined) throw new SyntaxError("Error reading response: malformed server-sent event JSON.");
  const failure = (value as { error?: unknown } | null)?.error;
  if (event.event === "error") throw new OpenAI.APIError(undefined, (failure ?? value) as object, undefined, response.headers);
  if (failure) throw new OpenAI.APIError(undefined, failure as object, undefined, response.headers);
  return value;
}

/** Drops a body nobody will read on, and its request (a Node stream is destroyed; a web stream is cancelled when its iterator returns). */
function drop(body: unknown): void {
  (body as { destroy?: () => void }).destroy?.();
}
