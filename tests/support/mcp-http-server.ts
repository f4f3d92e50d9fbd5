/**
 * The test MCP server (./mcp-test-server.ts) over streamable HTTP on 127.0.0.1 (port 0 unless
 * given) at `/mcp`, with sessions as the SDK's stateful transport keeps them, and over the older
 * HTTP+SSE transport at `/sse` (messages posted to `/messages`). `forgetSessions()` plays a server
 * that restarted: the sessions it handed out are unknown from then on (404).
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createTestMcpServer, type TestMcpServer, type TestServerOptions } from "./mcp-test-server.js";

export interface McpHttpServer {
  /** `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** `http://127.0.0.1:<port>/sse`, the HTTP+SSE transport's endpoint. */
  sseUrl: string;
  port: number;
  /** Every tool call, over all sessions. */
  calls: TestMcpServer["calls"];
  /** Sessions initialized so far. */
  sessionsStarted: () => number;
  /** Headers of every request, in order. */
  requestHeaders: IncomingMessage["headers"][];
  forgetSessions(): Promise<void>;
  close(): Promise<void>;
}

export async function startMcpHttpServer(options: { port?: number; extraTools?: TestServerOptions["extraTools"] } = {}): Promise<McpHttpServer> {
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: TestMcpServer }>();
  const sseSessions = new Map<string, SSEServerTransport>();
  const calls: TestMcpServer["calls"] = [];
  const requestHeaders: IncomingMessage["headers"][] = [];
  let started = 0;

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    requestHeaders.push(request.headers);
    if (request.method === "GET" && request.url === "/sse") {
      const transport = new SSEServerTransport("/messages", response);
      sseSessions.set(transport.sessionId, transport);
      response.on("close", () => sseSessions.delete(transport.sessionId));
      started += 1;
      await createTestMcpServer({ name: "countbot-sse-test-server", calls, extraTools: options.extraTools }).server.connect(transport);
      return;
    }
    if (request.method === "POST" && request.url?.startsWith("/messages")) {
      const transport = sseSessions.get(new URL(request.url, "http://localhost").searchParams.get("sessionId") ?? "");
      if (!transport) {
        response.writeHead(404).end();
        return;
      }
      return transport.handlePostMessage(request, response);
    }
    if (!request.url?.startsWith("/mcp")) {
      response.writeHead(404).end();
      return;
    }
    const sessionId = request.headers["mcp-session-id"];
    const known = typeof sessionId === "string" ? sessions.get(sessionId) : undefined;
    if (known) return known.transport.handleRequest(request, response);
    if (typeof sessionId === "string") {
      response.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
      return;
    }
    // Calls of every session land in one list.
    const server = createTestMcpServer({ name: "countbot-http-test-server", calls, extraTools: options.extraTools });
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        started += 1;
        sessions.set(id, { transport, server });
      },
    });
    await server.server.connect(transport);
    await transport.handleRequest(request, response);
  };

  const http = createServer((request, response) => {
    handle(request, response).catch(() => {
      if (!response.headersSent) response.writeHead(500);
      response.end();
    });
  });
  await new Promise<void>((resolve) => http.listen(options.port ?? 0, "127.0.0.1", resolve));
  const port = (http.address() as AddressInfo).port;
  const forgetSessions = async () => {
    const open = [...sessions.values()];
    sessions.clear();
    await Promise.all(open.map(({ server }) => server.server.close().catch(() => undefined)));
  };
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    sseUrl: `http://127.0.0.1:${port}/sse`,
    port,
    calls,
    sessionsStarted: () => started,
    requestHeaders,
    forgetSessions,
    async close() {
      await forgetSessions();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** A loopback TCP server that only counts connections: where a refused MCP URL points. */
export async function startTripwire(): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  const { createServer: createTcpServer } = await import("node:net");
  let connections = 0;
  const server = createTcpServer((socket) => {
    connections += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
