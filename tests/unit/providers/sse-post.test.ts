/**
 * The chat request's own transport (src/providers/sse-post.ts), against a raw loopback server that
 * writes the SSE bytes itself: framing the fake OpenAI server never produces, error bodies in the
 * shapes servers send them, and what happens to the connection when a reader stops.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createOpenAICompatibleProvider } from "../../../src/providers/openai-compatible.js";
import { postForEvents, SDK_HEADERS } from "../../../src/providers/sse-post.js";
import { createConnectionPool } from "../../../src/providers/connection-pool.js";
import { collect, collectFailure, textOf } from "./stream-helpers.js";

type Handler = (request: IncomingMessage, response: ServerResponse) => void;
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function serve(handler: Handler): Promise<string> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

const chunk = (fields: object) => JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", ...fields });
const text = (content: string) => chunk({ choices: [{ index: 0, delta: { content }, finish_reason: null }] });
const finish = chunk({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
const hello = [{ role: "user" as const, content: "hi" }];

/** Writes each piece as its own chunk, one event loop turn apart. */
function writeApart(response: ServerResponse, pieces: Array<string | Buffer>, end = true): void {
  response.writeHead(200, { "content-type": "text/event-stream" });
  let index = 0;
  const next = () => {
    if (index === pieces.length) {
      if (end) response.end();
      return;
    }
    response.write(pieces[index++]!, () => setImmediate(next));
  };
  next();
}

describe("the chat request's SSE transport", () => {
  it("reads CRLF lines, comments, events split mid-character and a last event without its blank line", async () => {
    const event = Buffer.from(`data: ${text("héllo wörld ✓")}\r\n\r\n`);
    const cut = event.indexOf("✓") + 1; // inside the three bytes of ✓
    const base = await serve((_request, response) =>
      writeApart(response, [": keep-alive\r\n\r\n", event.subarray(0, 7), event.subarray(7, cut), event.subarray(cut), `data: ${finish}\r\n\r\n`, `data: [DONE]`]),
    );
    const provider = createOpenAICompatibleProvider({ name: "p", baseURL: base });
    const parts = await collect(provider.stream({ model: "m", messages: hello }));
    expect(textOf(parts)).toBe("héllo wörld ✓");
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop" });
  });

  it("fails on a named error event, on data that is not JSON, and on a body that ends without a finish", async () => {
    const bodies = [
      [`data: ${text("so far")}\n\n`, `event: error\ndata: {"error":{"message":"overloaded","type":"overloaded_error"}}\n\n`],
      [`data: ${text("so far")}\n\n`, "data: {not json\n\n"],
      [`data: ${text("so far")}\n\n`],
    ];
    let call = 0;
    const base = await serve((_request, response) => writeApart(response, bodies[call++]!));
    const provider = createOpenAICompatibleProvider({ name: "p", baseURL: base });
    const failures = [];
    for (let index = 0; index < bodies.length; index++) failures.push(await collectFailure(provider.stream({ model: "m", messages: hello })));
    expect(failures.map((failure) => textOf(failure.parts))).toEqual(["so far", "so far", "so far"]);
    expect(failures.map((failure) => failure.error.kind)).toEqual(["server", "stream", "stream"]);
    expect(failures[1]!.error.message).toContain("malformed server-sent event JSON");
  });

  it("cuts a stream whose event passes 8 MiB without ending, and drops its request", async () => {
    let closedEarly: boolean | undefined;
    const base = await serve((_request, response) => {
      response.on("close", () => (closedEarly = !response.writableFinished));
      const megabyte = "x".repeat(1024 * 1024);
      writeApart(response, [`data: ${text("so far")}\n\ndata: {"a":"`, ...Array.from({ length: 9 }, () => megabyte)], false);
    });
    const provider = createOpenAICompatibleProvider({ name: "p", baseURL: base });
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(textOf(failure.parts)).toBe("so far");
    expect(failure.error).toMatchObject({ kind: "stream" });
    expect(failure.error.message).toContain("an event of the stream passed 8 MiB without ending");
    await expect.poll(() => closedEarly).toBe(true);
  });

  it.each([
    { name: "an OpenAI error object", status: 429, body: '{"error":{"message":"slow down","type":"rate_limit"}}', kind: "rate-limit", message: "429 slow down" },
    { name: "a bare JSON error", status: 400, body: '{"message":"Range of input length should be [1, 30720]"}', kind: "context-overflow", message: "400 Range of input length" },
    { name: "plain text", status: 502, body: "Bad Gateway from the proxy", kind: "server", message: "502 Bad Gateway from the proxy" },
    { name: "an HTML page", status: 502, body: "<html>\n  <head><title>502 Bad Gateway</title></head>\n</html>\n", kind: "server", message: "502 <html> <head><title>502 Bad Gateway</title></head> </html>" },
    { name: "no body", status: 401, body: "", kind: "auth", message: "401 status code (no body)" },
  ])("turns an error status with $name into the SDK's error, then the provider's kind", async ({ status, body, kind, message }) => {
    const base = await serve((_request, response) => response.writeHead(status, { "content-type": "text/plain" }).end(body));
    const provider = createOpenAICompatibleProvider({ name: "p", baseURL: base });
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(failure.error).toMatchObject({ kind, status });
    expect(failure.error.message).toContain(message);
  });

  it("reads at most 64 KiB of an error answer's body, and keeps 500 characters of a text one", async () => {
    const base = await serve((_request, response) => {
      response.writeHead(503, { "content-type": "text/plain" });
      response.write("overloaded ");
      // More than would ever be read, and never ended.
      response.write("z".repeat(1024 * 1024));
    });
    const provider = createOpenAICompatibleProvider({ name: "p", baseURL: base });
    const failure = await collectFailure(provider.stream({ model: "m", messages: hello }));
    expect(failure.error).toMatchObject({ kind: "server", status: 503 });
    // The text's first 500 characters, and how long the part read was.
    expect(failure.error.message).toBe(`p/m: 503 overloaded ${"z".repeat(489)}… (${64 * 1024} characters)`);
  });

  it("sends the SDK's headers, the key, and configured headers over them by any case", async () => {
    const seen: IncomingMessage["headers"][] = [];
    const base = await serve((request, response) => {
      seen.push(request.headers);
      writeApart(response, [`data: ${finish}\n\n`, "data: [DONE]\n\n"]);
    });
    await collect(createOpenAICompatibleProvider({ name: "p", apiKey: "sk-1", baseURL: `${base}/`, headers: { "User-Agent": "countbot-test" } }).stream({ model: "m", messages: hello }));
    await collect(createOpenAICompatibleProvider({ name: "p", apiKey: "sk-1", baseURL: base, headers: { Authorization: "Key other" } }).stream({ model: "m", messages: hello }));
    expect(seen[0]).toMatchObject({ authorization: "Bearer sk-1", accept: "application/json", "content-type": "application/json", "user-agent": "countbot-test" });
    expect(seen[1]).toMatchObject({ authorization: "Key other", "user-agent": SDK_HEADERS["user-agent"] });
  });

  it("leaves a body read to [DONE] to end by itself, and destroys one whose reader stopped or whose data failed", async () => {
    const bodies: Array<{ destroyed: boolean; returned: boolean }> = [];
    /** A fetch whose answer's body yields these chunks and records what was done to it. */
    const fetchOf = (chunks: string[]) =>
      (async () => {
        const state = { destroyed: false, returned: false };
        bodies.push(state);
        const iterator = chunks.map((text) => new TextEncoder().encode(text))[Symbol.iterator]();
        const body = {
          destroy: () => (state.destroyed = true),
          [Symbol.asyncIterator]: () => ({
            next: async () => iterator.next(),
            return: async () => ((state.returned = true), { done: true as const, value: undefined }),
          }),
        };
        return { ok: true, status: 200, headers: new Headers(), body } as unknown as Response;
      }) as unknown as typeof fetch;
    const request = { url: "http://127.0.0.1:9/unused", headers: {}, body: "{}", signal: new AbortController().signal };
    const answer = [`data: ${text("a")}\n\n`, `data: ${text("b")}\n\ndata: [DONE]\n\n`, "data: never read\n\n"];

    const whole: unknown[] = [];
    for await (const value of await postForEvents(fetchOf(answer), request)) whole.push(value);
    for await (const value of await postForEvents(fetchOf(answer), request)) if (value) break;
    await expect(async () => {
      for await (const value of await postForEvents(fetchOf([`data: ${text("a")}\n\n`, "data: {oops\n\n"]), request)) whole.push(value);
    }).rejects.toThrow(/malformed server-sent event JSON/);

    expect(whole).toHaveLength(3);
    expect(bodies).toEqual([
      { destroyed: false, returned: true },
      { destroyed: true, returned: true },
      { destroyed: true, returned: true },
    ]);
  });

  it("keeps the pool's connection of a stream read to [DONE] before the body's end is in", async () => {
    const sockets: Socket[] = [];
    const base = await serve((request, response) => {
      sockets.push(request.socket);
      writeApart(response, [`data: ${text("a")}\n\ndata: [DONE]\n\n`, ""]);
    });
    const { fetch } = createConnectionPool();
    for (let call = 0; call < 2; call++) {
      const values: unknown[] = [];
      for await (const value of await postForEvents(fetch, { url: `${base}/chat/completions`, headers: { ...SDK_HEADERS }, body: "{}", signal: new AbortController().signal })) values.push(value);
      expect(values).toHaveLength(1);
    }
    // Kept: it carried the second call, or it is still open (a call sent as the last body ends may
    // find its connection not back in the pool yet).
    expect(sockets[0] === sockets[1] || !sockets[0]!.destroyed).toBe(true);
  });
});
