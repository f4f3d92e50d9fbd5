/**
 * A scripted fake of the Brave Search web search API (`GET /res/v1/web/search?q=&count=`), answering
 * in Brave's JSON shape (`{ type: "search", query, web: { type: "search", results } }`) and its
 * `ErrorResponse` shape for a bad token (401) or the rate limit (429).
 *
 * ```ts
 * const brave = await startFakeBrave({ token: "key", script: [{ results: [{ title: "T", url: "https://t.example/" }] }, { status: 429 }] });
 * createWebSearchTool({ apiKey: "key", baseURL: brave.baseURL, maxResults: 5 });
 * ```
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { sendJson } from "./scripted-http-server.js";

export interface FakeBraveResult {
  title: string;
  url: string;
  description?: string;
}

/** One answer: results, or an HTTP error in Brave's format. */
export type FakeBraveStep =
  | { results: FakeBraveResult[] }
  | {
      status: 401 | 403 | 422 | 429 | 500 | 503;
      /** `X-RateLimit-Reset` seconds sent with a 429 (default 1). */
      resetSeconds?: number;
    };

export interface BraveRequest {
  method: string;
  path: string;
  /** The `q` parameter. */
  query: string | null;
  /** The `count` parameter. */
  count: string | null;
  headers: IncomingHttpHeaders;
}

export interface FakeBraveServer {
  /** `http://127.0.0.1:<port>/res/v1`: the tool's `baseURL`. */
  baseURL: string;
  /** Every request to the search route with the right token, in order. */
  requests: BraveRequest[];
  /** Requests refused for a missing or wrong token. */
  rejected: BraveRequest[];
  close(): Promise<void>;
}

export interface FakeBraveOptions {
  /** The only `X-Subscription-Token` accepted; anything else gets Brave's 401. */
  token: string;
  /** Steps consumed one per accepted request, or a function choosing the step. */
  script: FakeBraveStep[] | ((request: BraveRequest, index: number) => FakeBraveStep | undefined);
}

const searchPath = "/res/v1/web/search";

export async function startFakeBrave(options: FakeBraveOptions): Promise<FakeBraveServer> {
  const requests: BraveRequest[] = [];
  const rejected: BraveRequest[] = [];
  const server = createServer((incoming, response) => {
    incoming.resume();
    const url = new URL(incoming.url ?? "/", "http://fake-brave");
    const request: BraveRequest = {
      method: incoming.method ?? "GET",
      path: url.pathname,
      query: url.searchParams.get("q"),
      count: url.searchParams.get("count"),
      headers: incoming.headers,
    };
    if (request.method !== "GET" || request.path !== searchPath) {
      sendError(response, 404, "NOT_FOUND", `no route for ${request.method} ${request.path}`);
      return;
    }
    if (incoming.headers["x-subscription-token"] !== options.token) {
      rejected.push(request);
      sendError(response, 401, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.");
      return;
    }
    const index = requests.length;
    requests.push(request);
    const step = typeof options.script === "function" ? options.script(request, index) : options.script[index];
    if (!step) {
      sendError(response, 500, "SCRIPT_EXHAUSTED", `fake Brave: no step for request #${index + 1}`);
      return;
    }
    if ("status" in step) {
      if (step.status === 429) {
        const reset = String(step.resetSeconds ?? 1);
        sendError(response, 429, "RATE_LIMITED", "Request rate limit exceeded for plan.", {
          "x-ratelimit-limit": "1, 15000",
          "x-ratelimit-remaining": "0, 14000",
          "x-ratelimit-reset": `${reset}, 1419704`,
        });
      } else if (step.status === 401 || step.status === 403 || step.status === 422) {
        sendError(response, step.status, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.");
      } else {
        sendError(response, step.status, "INTERNAL_ERROR", "Something went wrong.");
      }
      return;
    }
    sendJson(response, 200, {
      type: "search",
      query: { original: request.query, show_strict_warning: false, more_results_available: false },
      web: {
        type: "search",
        results: step.results.map((result) => ({ type: "search_result", ...result, is_source_local: false, family_friendly: true })),
        family_friendly: true,
      },
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/res/v1`,
    requests,
    rejected,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function sendError(response: ServerResponse, status: number, code: string, detail: string, headers: Record<string, string> = {}): void {
  sendJson(
    response,
    status,
    { type: "ErrorResponse", error: { id: `fake-${status}`, status, code, detail, meta: {} }, time: Math.floor(Date.now() / 1000) },
    headers,
  );
}
