/**
 * The shared core of the fake LLM servers: a local HTTP server that records every request and
 * answers each with the next step of a script.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body. */
  body: Record<string, unknown>;
  /** The body exactly as it arrived (UTF-8): what a provider's prefix cache compares. */
  raw: string;
}

/** Steps consumed one per request, or a function choosing the step for each request. */
export type Script<Step> = Step[] | ((body: Record<string, unknown>, index: number) => Step | undefined);

export interface ScriptedServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  requests: RecordedRequest[];
  /** TCP connections accepted so far (a client that keeps connections alive opens few). */
  connections(): number;
  close(): Promise<void>;
}

/**
 * Pending connections the kernel queues before the server accepts them: a burst of hundreds of
 * clients at once (the benchmarks) must not be reset by a short queue (Node's default is 511).
 * The kernel caps it at net.core.somaxconn.
 */
const LISTEN_BACKLOG = 4096;

export interface ScriptedServerOptions<Step> {
  /** Names the server in the "script exhausted" error. */
  name: string;
  script: Script<Step>;
  /** Paths answered with the script; anything else gets a 404. */
  paths: string[];
  respond(step: Step, request: RecordedRequest, response: ServerResponse): Promise<void>;
  /** Writes an error in the API's own format. */
  sendError(response: ServerResponse, status: number, message: string): void;
  /** POST paths answered by their own handler with the raw body (a multipart upload), outside the script. */
  rawRoutes?: Record<string, (body: Buffer, headers: IncomingHttpHeaders, response: ServerResponse) => Promise<void>>;
}

export async function startScriptedServer<Step>(options: ScriptedServerOptions<Step>): Promise<ScriptedServer> {
  const requests: RecordedRequest[] = [];
  const server = createServer((incoming, response) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const path = (incoming.url ?? "/").split("?")[0] ?? "/";
      const rawRoute = incoming.method === "POST" ? options.rawRoutes?.[path] : undefined;
      if (rawRoute) {
        rawRoute(Buffer.concat(chunks), incoming.headers, response).catch((error: unknown) => {
          if (!response.headersSent) options.sendError(response, 500, `${options.name}: ${String(error)}`);
          else response.destroy();
        });
        return;
      }
      let body: Record<string, unknown> = {};
      const raw = Buffer.concat(chunks).toString("utf8");
      try {
        body = chunks.length ? (JSON.parse(raw) as Record<string, unknown>) : {};
      } catch {
        options.sendError(response, 400, `${options.name}: the request body is not JSON`);
        return;
      }
      if (incoming.method !== "POST" || !options.paths.includes(path)) {
        options.sendError(response, 404, `${options.name}: no route for ${incoming.method} ${path}`);
        return;
      }
      const index = requests.length;
      const request: RecordedRequest = { method: incoming.method, path, headers: incoming.headers, body, raw };
      requests.push(request);
      const step = typeof options.script === "function" ? options.script(body, index) : options.script[index];
      if (!step) {
        const length = typeof options.script === "function" ? "a function" : `${options.script.length} steps`;
        options.sendError(response, 500, `${options.name}: script exhausted: no step for request #${index + 1} (script has ${length})`);
        return;
      }
      options.respond(step, request, response).catch((error: unknown) => {
        if (!response.headersSent) options.sendError(response, 500, `${options.name}: ${String(error)}`);
        else response.destroy();
      });
    });
  });
  let connections = 0;
  server.on("connection", () => (connections += 1));
  await new Promise<void>((resolve) => server.listen({ port: 0, host: "127.0.0.1", backlog: LISTEN_BACKLOG }, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Waits, but stops early when the client went away; resolves whether the client is still there. */
export function wait(milliseconds: number, response: ServerResponse): Promise<boolean> {
  if (response.destroyed || response.writableEnded) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onClose = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      response.off("close", onClose);
      resolve(!response.destroyed);
    }, milliseconds);
    response.once("close", onClose);
  });
}

/** Writes and waits until the bytes left for the socket, so a later cut cannot swallow them. */
export function write(response: ServerResponse, text: string): Promise<void> {
  return new Promise((resolve) => {
    if (response.destroyed) return resolve();
    response.write(text, () => resolve());
  });
}

/**
 * Drops the connection mid-response, the way a crashing proxy does. The pause first lets the client
 * read what was already sent: a fetch body that errors discards the chunks still queued in it.
 */
export async function cut(response: ServerResponse): Promise<void> {
  await wait(50, response);
  response.socket?.destroy();
}

export function startEventStream(response: ServerResponse, headers: Record<string, string> = {}): void {
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", ...headers });
  response.flushHeaders();
}

export function sendJson(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(JSON.stringify(body));
}

/** Splits text into `count` pieces of similar size (the last may be longer). */
export function splitText(text: string, count: number): string[] {
  if (text.length <= 1 || count <= 1) return [text];
  const size = Math.max(1, Math.floor(text.length / count));
  const pieces: string[] = [];
  for (let start = 0; start < text.length; start += size) pieces.push(text.slice(start, start + size));
  return pieces;
}
