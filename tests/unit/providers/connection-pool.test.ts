/**
 * The provider connection pool's fetch, against a loopback server: a text body goes through the
 * pool's own request, and a multipart body (the platform's FormData, as SDKs build it for uploads)
 * arrives as multipart with its parts, not as the text "[object FormData]".
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConnectionPool } from "../../../src/providers/connection-pool.js";

const received: Array<{ method: string; contentType: string; body: string }> = [];
const server = createServer(async (request: IncomingMessage, response) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  received.push({ method: request.method ?? "", contentType: String(request.headers["content-type"] ?? ""), body: Buffer.concat(chunks).toString("utf8") });
  response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true }));
});
let base: string;

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

describe("connection pool fetch", () => {
  it("sends a JSON body through the pool and hands back the answer", async () => {
    const pool = createConnectionPool();
    const response = await pool.fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m" }) });
    expect(await response.json()).toEqual({ ok: true });
    expect(received.at(-1)).toEqual({ method: "POST", contentType: "application/json", body: '{"model":"m"}' });
  });

  it("sends the platform's FormData as multipart, with its fields and its file", async () => {
    const pool = createConnectionPool();
    const form = new FormData();
    form.append("model", "whisper-1");
    form.append("file", new Blob([new Uint8Array([0x4f, 0x67, 0x67, 0x53])], { type: "audio/ogg" }), "voice.ogg");
    for (const fetcher of [pool.fetch, pool.wholeFetch]) {
      const response = await fetcher(`${base}/v1/audio/transcriptions`, { method: "POST", body: form });
      expect(response.status).toBe(200);
      const last = received.at(-1)!;
      expect(last.contentType).toMatch(/^multipart\/form-data; boundary=/);
      expect(last.body).not.toContain("[object FormData]");
      expect(last.body).toContain('name="model"\r\n\r\nwhisper-1');
      expect(last.body).toMatch(/name="file"; filename="voice.ogg"\r\nContent-Type: audio\/ogg\r\n\r\nOggS/);
    }
  });
});

describe("connection pool streams", () => {
  // A server streaming a few SSE chunks per request, noting each connection it sees closed; "/endless" never ends.
  const closed: Socket[] = [];
  const streaming = createServer((request, response) => {
    response.writeHead(200, { "content-type": "text/event-stream" });
    if (request.url === "/dropped") {
      request.socket.destroy();
      return;
    }
    if (request.url === "/dropped-once" && !droppedOnce) {
      droppedOnce = true;
      request.socket.destroy();
      return;
    }
    if (request.url === "/reset-once" && !resetOnce) {
      // A TCP reset, as a server sends when it closes a connection with a request unread in it.
      resetOnce = true;
      request.socket.resetAndDestroy();
      return;
    }
    if (request.url === "/done-then-end") {
      // `[DONE]` first, the body's end a moment later: a reader stops before the end is in.
      response.write("data: 1\n\ndata: [DONE]\n\n");
      setTimeout(() => response.end(), 20);
      return;
    }
    if (request.url === "/endless") {
      const timer = setInterval(() => response.write("data: more\n\n"), 5);
      response.on("close", () => clearInterval(timer));
      return;
    }
    let sent = 0;
    const timer = setInterval(() => {
      sent += 1;
      if (sent <= 3) response.write(`data: ${sent}\n\n`);
      else {
        clearInterval(timer);
        response.end("data: [DONE]\n\n");
      }
    }, 2);
  });
  let connections = 0;
  streaming.on("connection", (socket) => {
    connections += 1;
    socket.on("close", () => closed.push(socket));
  });
  let url: string;
  let droppedOnce = false;
  let resetOnce = false;

  beforeAll(async () => {
    await new Promise<void>((resolve) => streaming.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(streaming.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    streaming.closeAllConnections();
    await new Promise((resolve) => streaming.close(resolve));
  });

  const text = async (body: AsyncIterable<Uint8Array>) => {
    let all = "";
    for await (const chunk of body) all += Buffer.from(chunk).toString("utf8");
    return all;
  };

  it("reads streamed bodies to their end, and frees the connection of a stream stopped early", async () => {
    const pool = createConnectionPool();
    for (let call = 0; call < 3; call += 1) {
      const response = await pool.fetch(`${url}/stream`, { method: "POST", body: "{}" });
      expect(await text(response.body as unknown as AsyncIterable<Uint8Array>)).toBe("data: 1\n\ndata: 2\n\ndata: 3\n\ndata: [DONE]\n\n");
    }
    // Read to its end, a connection stays open for the next call (kept alive), none was dropped.
    expect(closed.length).toBe(0);

    const endless = await pool.fetch(`${url}/endless`, { method: "POST", body: "{}" });
    const closedBefore = closed.length;
    for await (const chunk of endless.body as unknown as AsyncIterable<Uint8Array>) {
      expect(Buffer.from(chunk).toString("utf8")).toContain("data: more");
      break;
    }
    // Stopped early: the connection goes (it cannot be reused mid-answer), and the next call gets another.
    while (closed.length === closedBefore) await new Promise((resolve) => setTimeout(resolve, 5));
    const after = await pool.fetch(`${url}/stream`, { method: "POST", body: "{}" });
    expect(await text(after.body as unknown as AsyncIterable<Uint8Array>)).toContain("[DONE]");
  });

  it("keeps the connection of a stream whose reader stops at [DONE] before the body's end is in, with no error", async () => {
    const pool = createConnectionPool();
    const closedBefore = closed.length;
    const connectionsBefore = connections;
    for (let call = 0; call < 3; call += 1) {
      const response = await pool.fetch(`${url}/done-then-end`, { method: "POST", body: "{}" });
      let seen = "";
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        seen += Buffer.from(chunk).toString("utf8");
        if (seen.includes("[DONE]")) break;
      }
      expect(seen).toContain("data: [DONE]");
    }
    // No connection was dropped: each stayed kept alive (a call sent as the last body ends may find
    // its connection not back in the pool yet and open a second one, not more).
    expect(closed.length).toBe(closedBefore);
    expect(connections - connectionsBefore).toBeLessThanOrEqual(2);
  });

  it("sends a request once more when the server closed or reset its connection before any answer (a kept-alive connection it dropped), and only once", async () => {
    const pool = createConnectionPool();
    const response = await pool.fetch(`${url}/dropped-once`, { method: "POST", body: "{}" });
    expect(await text(response.body as unknown as AsyncIterable<Uint8Array>)).toContain("[DONE]");
    const afterReset = await pool.fetch(`${url}/reset-once`, { method: "POST", body: "{}" });
    expect(await text(afterReset.body as unknown as AsyncIterable<Uint8Array>)).toContain("[DONE]");
    expect(resetOnce).toBe(true);
    await expect(pool.fetch(`${url}/dropped`, { method: "POST", body: "{}" })).rejects.toMatchObject({ code: "UND_ERR_SOCKET" });
  });
});
