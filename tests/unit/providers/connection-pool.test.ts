/**
 * The provider connection pool's fetch, against a loopback server: a text body goes through the
 * pool's own request, and a multipart body (the platform's FormData, as SDKs build it for uploads)
 * arrives as multipart with its parts, not as the text "[object FormData]".
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
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
