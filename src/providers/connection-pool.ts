/**
 * The HTTP connections of one provider: a keep-alive pool of its own (an undici Agent), so model
 * calls reuse warm connections instead of each paying a TCP (and TLS) handshake, and a burst of
 * calls to one provider shares a pool with nothing else.
 *
 * Idle connections stay open for 30 s (or less, as the server's Keep-Alive header says) and never
 * keep the process alive. No timeouts of the pool's own: the provider bounds every request (the
 * SDK's `timeout` until the headers, then the idle timer and the overall deadline, ./idle-timer.ts).
 *
 * `fetch` is the SDK's way in: a request with a text body (every chat completion) goes through the
 * pool's own `request`, and the response is handed back with the body as the Node stream undici
 * reads it into, which the SDK iterates as it is. WHATWG fetch does the same work through web
 * streams on both sides and costs about twice the CPU per call (bench/README); anything else (a
 * multipart body) takes the platform's fetch, through the same pool.
 */
import { Agent, fetch as undiciFetch, type Dispatcher } from "undici";

/** How long an idle connection is kept for the next call. */
const KEEP_ALIVE_MS = 30_000;

export interface ConnectionPool {
  /** For the SDK's `fetch` option. */
  fetch: typeof fetch;
  /** A whole WHATWG fetch through this pool, for an SDK whose response handling wants one. */
  wholeFetch: typeof fetch;
}

export function createConnectionPool(): ConnectionPool {
  const dispatcher = new Agent({ keepAliveTimeout: KEEP_ALIVE_MS, keepAliveMaxTimeout: 10 * 60_000, headersTimeout: 0, bodyTimeout: 0 });

  async function poolFetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
    if (input instanceof Request || (init.body != null && typeof init.body !== "string")) {
      return poolFetchWhole(input, init);
    }
    const url = new URL(String(input));
    const options = {
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: (init.method ?? "GET") as Dispatcher.HttpMethod,
      headers: headerRecord(init.headers),
      body: init.body ?? undefined,
      signal: init.signal ?? undefined,
    };
    const send = () => dispatcher.request(options);
    let answer: Dispatcher.ResponseData;
    try {
      answer = await send();
    } catch (error) {
      // A kept-alive connection the server closed as the request went out on it, before any
      // answer: "other side closed", or a reset when the server closed it with the request unread
      // (the race at the server's keep-alive timeout, which no client timing avoids): sent once
      // more, on a fresh connection.
      if (!isClosedBeforeAnswer(error) || init.signal?.aborted) throw error;
      answer = await send();
    }
    // `request` does not follow redirects; fetch does, so a server that redirects gets fetch.
    if (answer.statusCode >= 300 && answer.statusCode < 400 && answer.headers.location !== undefined) {
      await answer.body.dump();
      return poolFetchWhole(input, init);
    }
    return poolResponse(url.href, answer);
  }

  // undici's own fetch, not the platform's: the Agent is this undici's, and Node's bundled one may
  // be another major (Node 22 bundles undici 6).
  function poolFetchWhole(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
    return undiciFetch(input as Parameters<typeof undiciFetch>[0], { ...portableBody(init), dispatcher } as Parameters<typeof undiciFetch>[1]) as unknown as Promise<Response>;
  }

  return { fetch: poolFetch as typeof fetch, wholeFetch: poolFetchWhole as typeof fetch };
}

function isClosedBeforeAnswer(error: unknown): boolean {
  const code = error instanceof Error ? (error as Error & { code?: string }).code : undefined;
  return code === "UND_ERR_SOCKET" || code === "ECONNRESET" || code === "EPIPE";
}

/** The request headers as a plain record (what `request` takes), whatever shape the SDK built. */
function headerRecord(headers: RequestInit["headers"]): Record<string, string> {
  const record: Record<string, string> = {};
  if (headers === undefined) return record;
  if (headers instanceof Headers) headers.forEach((value, name) => (record[name] = value));
  else if (Array.isArray(headers)) for (const [name, value] of headers as string[][]) record[name!.toLowerCase()] = value!;
  else for (const [name, value] of Object.entries(headers as Record<string, string | undefined>)) if (value !== undefined) record[name.toLowerCase()] = value;
  return record;
}

/**
 * What the SDKs read of a fetch Response (status, headers, the body as an async iterable, or as
 * text or JSON for an error), over undici's answer; the body is read once.
 */
function poolResponse(url: string, answer: Dispatcher.ResponseData): Response {
  // Made when asked for: a chat stream that goes well never reads them.
  let headers: Headers | undefined;
  const headersOf = () => {
    const made = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined) continue;
      if (Array.isArray(value)) for (const item of value) made.append(name, item);
      else made.set(name, value);
    }
    return (headers = made);
  };
  const { body, statusCode } = answer;
  Object.defineProperty(body, Symbol.asyncIterator, { value: () => endingQuietly(body) });
  const response = {
    ok: statusCode >= 200 && statusCode < 300,
    status: statusCode,
    statusText: "",
    get headers() {
      return headers ?? headersOf();
    },
    url,
    redirected: false,
    type: "basic",
    body,
    get bodyUsed() {
      return body.bodyUsed;
    },
    text: () => body.text(),
    json: () => body.json(),
    arrayBuffer: () => body.arrayBuffer(),
    blob: () => body.blob(),
  };
  return response as unknown as Response;
}

/**
 * The body's chunks, for a reader that may stop early. An SSE reader stops at `[DONE]`, mostly
 * before the body's last empty chunk has been read, and Node's own iterator then destroys the body
 * with an AbortError (whose stack costs more than the rest of the stream's end) and, when the last
 * chunk was not in yet, the connection with it. Here a reader that stops between reads lets the
 * body end by itself, read on and dropped, for up to END_WAIT_MS (its connection stays kept alive),
 * and destroys it after that. A reader that stops while a read is pending (an abort) destroys it at
 * once; so does an aborted request (the SDK aborts it when it stops before `[DONE]`).
 */
function endingQuietly(body: Dispatcher.ResponseData["body"]): AsyncIterableIterator<Buffer> {
  const chunks = body.iterator({ destroyOnReturn: false }) as AsyncIterableIterator<Buffer>;
  let reading = false;
  return {
    async next() {
      reading = true;
      try {
        return await chunks.next();
      } finally {
        reading = false;
      }
    },
    async return(value?: unknown) {
      // Nobody reads the body from here on: an error it meets (its request aborted) is nobody's.
      body.on("error", () => {});
      if (reading) body.destroy();
      await chunks.return?.();
      if (!body.readableEnded && !body.destroyed && !(await endsByItself(body))) body.destroy();
      return { done: true, value };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/** How long a body whose reader stopped may take to end by itself before it is destroyed. */
const END_WAIT_MS = 1_000;

/** Whether the body, read on and dropped, ends within END_WAIT_MS. */
function endsByItself(body: Dispatcher.ResponseData["body"]): Promise<boolean> {
  return new Promise((resolve) => {
    const late = setTimeout(() => resolve(false), END_WAIT_MS).unref();
    body.once("end", () => {
      clearTimeout(late);
      resolve(true);
    });
    body.resume();
  });
}

/**
 * The platform's FormData (what SDKs build for an upload) is another class than this undici's, whose
 * fetch would send it as the text "[object FormData]": it goes as the multipart stream the
 * platform encodes it to, with its boundary, streamed rather than buffered.
 */
function portableBody(init: RequestInit): RequestInit {
  if (!(init.body instanceof globalThis.FormData)) return init;
  const encoded = new globalThis.Response(init.body);
  const headers = new globalThis.Headers(init.headers);
  headers.set("content-type", encoded.headers.get("content-type")!);
  return { ...init, headers, body: encoded.body, duplex: "half" } as RequestInit;
}
