/**
 * Oversized bodies are refused with 413 while they arrive, before anything parses them: the web
 * chat's message route takes large bodies only as images (a 10 MB body of text is a 413, not a 400
 * from validation after parsing), every other route has the API's small default, and the
 * OpenAI-compatible endpoint answers its 413 in OpenAI's error shape.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createOpenAiEndpoint } from "../../../src/api/openai/endpoint.js";
import { createApiServer } from "../../../src/api/server.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import { startWebGateway } from "../../support/web-gateway.js";

const TOKEN = "body-limits-token-0123456789";
const MB = 1024 * 1024;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function webGateway() {
  const bus = createMemoryBus();
  cleanups.push(() => bus.close());
  const mediaDirectory = await mkdtemp(path.join(tmpdir(), "countbot-body-limits-"));
  cleanups.push(() => rm(mediaDirectory, { recursive: true, force: true }));
  const gateway = await startWebGateway({ bus, token: TOKEN, mediaDirectory });
  cleanups.push(() => gateway.close());
  const post = async (route: string, body: string) => {
    const response = await fetch(`${gateway.url}${route}`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` }, body });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  return { bus, post };
}

/** A PNG's signature and then `bytes` more: what the route takes for an image. */
function png(bytes: number): string {
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(bytes, 7)]).toString("base64");
}

describe("body limits", () => {
  it("refuses a 10 MB message of text with 413 at the parser, however it is written", async () => {
    const { post } = await webGateway();
    const letters = await post("/api/chat/room/messages", JSON.stringify({ content: "x".repeat(10 * MB) }));
    expect(letters.status).toBe(413);
    expect(letters.body.error).toMatch(/^body too large: an image \(a base64 run\) is longer than/);
    const words = await post("/api/chat/room/messages", JSON.stringify({ content: "hello world ".repeat(MB) }));
    expect(words.status).toBe(413);
    expect(words.body.error).toMatch(/^body too large: more than 524288 bytes besides the images/);
    const manyFields = await post("/api/chat/room/messages", JSON.stringify({ content: "hi", padding: Array.from({ length: 8 }, () => "y".repeat(MB)) }));
    expect(manyFields.status).toBe(413);
    expect(manyFields.body.error).toMatch(/^body too large: more than 4 images/);
  });

  it("still takes a message with images of the largest size, and an ordinary one", async () => {
    const { post } = await webGateway();
    const image = { mimeType: "image/png", data: png(5 * MB - 8) };
    const large = await post("/api/chat/room/messages", JSON.stringify({ content: "two big ones", images: [image, image] }));
    expect(large.status).toBe(202);
    expect((await post("/api/chat/room/messages", JSON.stringify({ content: "é\"\\".repeat(10_000) }))).status).toBe(202);
  });

  it("refuses a body over the default limit on any other route with 413 naming the limit", async () => {
    const { post } = await webGateway();
    const response = await post("/api/sessions/web:room/cancel", JSON.stringify({ padding: "z".repeat(300 * 1024) }));
    expect(response.status).toBe(413);
    expect(response.body).toEqual({ error: "body too large: this route takes at most 262144 bytes" });
  });

  it("answers an oversized OpenAI-compatible request with 413 in OpenAI's error shape", async () => {
    const bus = createMemoryBus();
    cleanups.push(() => bus.close());
    const logger = pino({ level: "silent" });
    const openai = createOpenAiEndpoint({
      bus,
      teams: { enabled: async () => [] },
      workflows: { start: async () => Promise.reject(new Error("unused")), get: async () => undefined, cancel: async () => undefined },
      config: { apiKeys: [], timeoutSeconds: 5 },
      logger,
    });
    const server = createApiServer({ bus, config: { host: "127.0.0.1", port: 0, token: TOKEN }, logger, readiness: async () => ({ ready: true, checks: {} }), families: [openai.family], routes: [openai.routes] });
    cleanups.push(() => server.close());
    const { url } = await server.listen();
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ model: "countbot", messages: [{ role: "user", content: "q ".repeat(3 * MB) }] }),
    });
    expect(response.status).toBe(413);
    const body = (await response.json()) as { error: { message: string; type: string } };
    expect(body.error.message).toBe(`body too large: this route takes at most ${4 * MB} bytes`);
    expect(body.error.type).toBe("invalid_request_error");
  });
});
