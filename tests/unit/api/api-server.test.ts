import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { type ApiServer, type Readiness, createApiServer, isLoopbackHost } from "../../../src/api/server.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { ConfigError } from "../../../src/errors.js";
import { startWebGateway } from "../../support/web-gateway.js";

const TOKEN = "test-token-0123456789";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Started {
  bus: MessageBus;
  server: ApiServer;
  url: string;
}

async function start(
  options: { token?: string; host?: string; readiness?: () => Promise<Readiness>; allowedOrigins?: string[] } = {},
): Promise<Started> {
  const bus = createMemoryBus();
  cleanups.push(() => bus.close());
  let counter = 0;
  const gateway = await startWebGateway({
    bus,
    token: options.token,
    host: options.host,
    allowedOrigins: options.allowedOrigins,
    readiness: options.readiness ?? (async () => ({ ready: true, checks: { bus: { ok: true } } })),
    newId: () => `message-${++counter}`,
    now: () => 1_000,
  });
  cleanups.push(() => gateway.close());
  return { bus, server: gateway.server, url: gateway.url };
}

function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
}

/** The HTTP status the server answered a WebSocket upgrade with (101 when it opened). */
function upgradeStatus(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers });
    socket.on("open", () => {
      socket.close();
      resolve(101);
    });
    socket.on("unexpected-response", (_request, response) => {
      resolve(response.statusCode ?? 0);
      socket.terminate();
    });
    socket.on("error", (error) => reject(error));
  });
}

describe("probes", () => {
  it("answers /health without a token", async () => {
    const { url } = await start({ token: TOKEN });
    const response = await fetch(`${url}/health`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "ok" });
  });

  it("answers /ready with 200 when every check is ok", async () => {
    const { url } = await start({ token: TOKEN });
    const response = await fetch(`${url}/ready`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ready: true, checks: { bus: { ok: true } } });
  });

  it("answers /ready with 503 and the checks when one fails", async () => {
    const { url } = await start({
      readiness: async () => ({ ready: true, checks: { redis: { ok: true }, leases: { ok: false, detail: "renewal late by 12 s" } } }),
    });
    const response = await fetch(`${url}/ready`);
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({
      ready: false,
      checks: { redis: { ok: true }, leases: { ok: false, detail: "renewal late by 12 s" } },
    });
  });

  it("answers /ready with 503 when the checks throw", async () => {
    const { url } = await start({
      readiness: async () => {
        throw new Error("connect ECONNREFUSED 127.0.0.1:6379");
      },
    });
    const response = await fetch(`${url}/ready`);
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({ ready: false, checks: { readiness: { ok: false, detail: "connect ECONNREFUSED 127.0.0.1:6379" } } });
  });
});

describe("bearer token", () => {
  it("refuses /api requests without the token or with a wrong one", async () => {
    const { url } = await start({ token: TOKEN });
    const body = { content: "hello" };
    const refused: Array<Record<string, string>> = [{}, { authorization: "Bearer wrong-token" }, { authorization: `Basic ${TOKEN}` }, { authorization: `Bearer ${TOKEN}x` }];
    for (const headers of refused) {
      const response = await post(`${url}/api/chat/room/messages`, body, headers);
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toMatch(/^Bearer/);
      expect(await response.json()).toEqual({ error: "missing or wrong bearer token" });
    }
    expect((await post(`${url}/api/sessions/web:room/cancel`, {})).status).toBe(401);
    // Unknown paths too: nothing about the routes is told to a caller without the token.
    expect((await fetch(`${url}/api/nothing-here`)).status).toBe(401);
    expect((await post(`${url}/api/chat/room/messages`, body, { authorization: `Bearer ${TOKEN}` })).status).toBe(202);
    expect((await post(`${url}/api/chat/room/messages`, body, { authorization: `bearer ${TOKEN}` })).status).toBe(202);
  });

  it("refuses a WebSocket upgrade without the token", async () => {
    const { url } = await start({ token: TOKEN });
    const wsUrl = `${url.replace("http", "ws")}/ws?chatId=room`;
    expect(await upgradeStatus(wsUrl)).toBe(401);
    expect(await upgradeStatus(wsUrl, { authorization: "Bearer nope" })).toBe(401);
    expect(await upgradeStatus(wsUrl, { authorization: `Bearer ${TOKEN}` })).toBe(101);
  });

  it("asks for no token on loopback when none is configured", async () => {
    const { url } = await start();
    expect((await post(`${url}/api/chat/room/messages`, { content: "hi" })).status).toBe(202);
  });

  it("refuses to listen beyond loopback without a token", async () => {
    const bus = createMemoryBus();
    cleanups.push(() => bus.close());
    for (const token of [undefined, "", "   "]) {
      const server = createApiServer({
        bus,
        config: { host: "0.0.0.0", port: 0, token },
        logger: pino({ level: "silent" }),
        readiness: async () => ({ ready: true, checks: {} }),
      });
      cleanups.push(() => server.close());
      const error: unknown = await server.listen().catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).path).toBe("api.token");
      expect((error as Error).message).toMatch(/api\.token/);
      expect((error as Error).message).toMatch(/COUNTBOT_API_TOKEN/);
    }
  });

  it("listens beyond loopback with a token", async () => {
    const { url } = await start({ host: "0.0.0.0", token: TOKEN });
    const port = new URL(url).port;
    const response = await fetch(`http://127.0.0.1:${port}/health`);
    expect(response.status).toBe(200);
  });

  it("knows which hosts are loopback", () => {
    for (const host of ["127.0.0.1", "127.8.9.10", "localhost", "LOCALHOST", "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"]) {
      expect(isLoopbackHost(host), host).toBe(true);
    }
    for (const host of ["0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "example.com", "localhost.example.com", ""]) {
      expect(isLoopbackHost(host), host).toBe(false);
    }
  });
});

describe("browser origins", () => {
  it("refuses a WebSocket opened by another site, and takes the API's own origin and clients that send none", async () => {
    const { url } = await start();
    const wsUrl = `${url.replace("http", "ws")}/ws?chatId=room`;
    expect(await upgradeStatus(wsUrl, { origin: "http://evil.example" })).toBe(403);
    expect(await upgradeStatus(wsUrl, { origin: "null" })).toBe(403);
    expect(await upgradeStatus(wsUrl, { origin: url })).toBe(101);
    expect(await upgradeStatus(wsUrl)).toBe(101);
  });

  it("refuses state-changing requests from another site, bodiless ones included, and lets reads through", async () => {
    const { bus, url } = await start();
    const cancelled: string[] = [];
    const subscription = await bus.onCancel((sessionKey) => cancelled.push(sessionKey));
    cleanups.push(() => subscription.close());
    const evil = { origin: "http://evil.example" };
    const cancel = await fetch(`${url}/api/sessions/web:room/cancel`, { method: "POST", headers: evil });
    expect(cancel.status).toBe(403);
    expect(await cancel.json()).toEqual({ error: expect.stringContaining("origin http://evil.example may not use this API") });
    expect((await post(`${url}/api/chat/room/messages`, { content: "hi" }, evil)).status).toBe(403);
    // A look-alike host is another site.
    expect((await post(`${url}/api/chat/room/messages`, { content: "hi" }, { origin: url.replace("127.0.0.1", "127.0.0.1.evil.example") })).status).toBe(403);
    expect(cancelled).toEqual([]);
    expect((await fetch(`${url}/health`, { headers: evil })).status).toBe(200);
    expect((await post(`${url}/api/chat/room/messages`, { content: "hi" }, { origin: url })).status).toBe(202);
  });

  it("lets the origins in api.allowedOrigins in", async () => {
    const { url } = await start({ allowedOrigins: ["https://console.example.com"] });
    expect((await post(`${url}/api/chat/room/messages`, { content: "hi" }, { origin: "https://console.example.com" })).status).toBe(202);
    expect(await upgradeStatus(`${url.replace("http", "ws")}/ws?chatId=room`, { origin: "https://console.example.com" })).toBe(101);
    expect((await post(`${url}/api/chat/room/messages`, { content: "hi" }, { origin: "https://other.example.com" })).status).toBe(403);
  });

  it("takes only JSON bodies, and sends the security headers", async () => {
    const { url } = await start();
    const plain = await fetch(`${url}/api/chat/room/messages`, { method: "POST", headers: { "content-type": "text/plain" }, body: '{"content":"hi"}' });
    expect(plain.status).toBe(415);
    const form = await fetch(`${url}/api/chat/room/messages`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "content=hi" });
    expect(form.status).toBe(415);
    const health = await fetch(`${url}/health`);
    expect(health.headers.get("x-content-type-options")).toBe("nosniff");
    expect(health.headers.get("x-frame-options")).toBe("SAMEORIGIN");
    expect(health.headers.get("content-security-policy")).toContain("default-src 'self'");
    // The same headers on an error and on a path no route has: they are set before routing.
    for (const response of [plain, await fetch(`${url}/no-such-route`)]) {
      expect(response.headers.get("x-content-type-options")).toBe("nosniff");
      expect(response.headers.get("content-security-policy")).toBe(health.headers.get("content-security-policy"));
      expect(response.headers.get("strict-transport-security")).toContain("max-age=");
    }
  });
});

describe("request bodies", () => {
  it("answers 400 naming the field", async () => {
    const { url } = await start();
    const cases: Array<[unknown, string]> = [
      [{}, "content: expected a string, but it is missing"],
      [{ content: 42 }, "content: expected a string, got 42"],
      [{ content: "" }, "content: expected at least 1 character"],
      [{ content: "   " }, "content: expected some text, not only spaces"],
      [{ content: "x".repeat(32_769) }, "content: expected at most 32768 characters"],
      [{ content: "hi", senderId: "" }, "senderId: expected at least 1 character"],
      [{ content: "hi", contnet: "hi" }, 'body: unknown field "contnet" (did you mean "content"?)'],
      [[], "body: expected an object"],
    ];
    for (const [body, error] of cases) {
      const response = await post(`${url}/api/chat/room/messages`, body);
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({ error: expect.stringContaining(error) });
    }
  });

  it("answers 400 for a bad chat id, a body that is not JSON and a missing body", async () => {
    const { url } = await start();
    const badChat = await post(`${url}/api/chat/${encodeURIComponent("a b")}/messages`, { content: "hi" });
    expect(badChat.status).toBe(400);
    expect(((await badChat.json()) as { error: string }).error).toMatch(/^chatId: /);
    const longChat = await post(`${url}/api/chat/${"c".repeat(129)}/messages`, { content: "hi" });
    expect(await longChat.json()).toEqual({ error: expect.stringMatching(/^chatId: expected at most 128 characters/) });
    const hugeChat = await post(`${url}/api/chat/${"c".repeat(600)}/messages`, { content: "hi" });
    expect(hugeChat.status).toBe(414);
    expect(await hugeChat.json()).toEqual({ error: "a path parameter is longer than 512 characters" });

    const notJson = await fetch(`${url}/api/chat/room/messages`, { method: "POST", headers: { "content-type": "application/json" }, body: "{content" });
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toEqual({ error: expect.any(String) });

    const noBody = await fetch(`${url}/api/chat/room/messages`, { method: "POST" });
    expect(noBody.status).toBe(400);
    expect(await noBody.json()).toEqual({ error: "body: expected an object, but it is missing" });
  });

  it("answers 404 as JSON", async () => {
    const { url } = await start();
    const response = await fetch(`${url}/api/nothing-here?x=1`);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: "not found: GET /api/nothing-here" });
  });
});

describe("session control", () => {
  it("asks the bus to cancel the session's turn", async () => {
    const { bus, url } = await start({ token: TOKEN });
    const cancelled: string[] = [];
    const subscription = await bus.onCancel((sessionKey) => cancelled.push(sessionKey));
    cleanups.push(() => subscription.close());
    const response = await fetch(`${url}/api/sessions/${encodeURIComponent("telegram:-100123")}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ sessionKey: "telegram:-100123" });
    expect(cancelled).toEqual(["telegram:-100123"]);
  });

  it("answers 400 for a bad session key", async () => {
    const { url } = await start();
    const response = await fetch(`${url}/api/sessions/${encodeURIComponent("web:a/b")}/cancel`, { method: "POST" });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toMatch(/^sessionKey: /);
  });
});
