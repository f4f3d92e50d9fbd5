/**
 * Images attached to a web message: kept as files under the channel's media directory (named by
 * the message id), handed to the bus as image media, refused by name when they are not what they
 * claim, too many, or when the channel keeps no files.
 */
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import { startWebGateway } from "../../support/web-gateway.js";

const TOKEN = "web-images-token";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The 8-byte PNG signature and a little more: enough to be taken for a PNG. */
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(600 * 1024, 7)]);

async function start(options: { media: boolean }) {
  const bus = createMemoryBus();
  cleanups.push(() => bus.close());
  const mediaDirectory = await mkdtemp(path.join(tmpdir(), "countbot-web-media-"));
  cleanups.push(() => rm(mediaDirectory, { recursive: true, force: true }));
  let counter = 0;
  const gateway = await startWebGateway({ bus, token: TOKEN, newId: () => `message-${++counter}`, ...(options.media ? { mediaDirectory } : {}) });
  cleanups.push(() => gateway.close());
  const send = (body: unknown) =>
    fetch(`${gateway.url}/api/chat/room/messages`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` }, body: JSON.stringify(body) });
  return { bus, mediaDirectory, send };
}

describe("images on web messages", () => {
  it("keeps an attached image as a file and hands it to the bus as image media, a body larger than the API's usual limit included", async () => {
    const { bus, mediaDirectory, send } = await start({ media: true });
    const response = await send({ content: "what is this?", images: [{ name: "../../etc/cat.png", mimeType: "image/png", data: PNG.toString("base64") }] });
    expect(response.status).toBe(202);
    const claim = await bus.claimSession({ timeoutMs: 1_000 });
    const [message] = claim!.messages;
    expect(message!.content).toBe("what is this?");
    expect(message!.media).toEqual([{ path: path.join(mediaDirectory, "message-1-0.png"), mimeType: "image/png", kind: "image", name: "../../etc/cat.png" }]);
    expect((await readFile(message!.media[0]!.path)).equals(PNG)).toBe(true);
    expect(await readdir(mediaDirectory)).toEqual(["message-1-0.png"]);
  });

  it("takes an image without text, but not an empty message", async () => {
    const { bus, send } = await start({ media: true });
    expect((await send({ content: "", images: [{ mimeType: "image/png", data: PNG.toString("base64") }] })).status).toBe(202);
    const claim = await bus.claimSession({ timeoutMs: 1_000 });
    expect(claim!.messages[0]!.media).toHaveLength(1);
    const empty = await send({ content: "" });
    expect(empty.status).toBe(400);
    expect(await empty.json()).toEqual({ error: "content: expected at least 1 character (or an image)" });
  });

  it("refuses, by name, an image that is not what it claims, one of another type, and too many", async () => {
    const { mediaDirectory, send } = await start({ media: true });
    const notPng = await send({ content: "x", images: [{ mimeType: "image/png", data: Buffer.from("GIF89a-not-a-png").toString("base64") }] });
    expect(notPng.status).toBe(400);
    expect(await notPng.json()).toEqual({ error: "images[0].data: the bytes are not a PNG image" });
    const svg = await send({ content: "x", images: [{ mimeType: "image/svg+xml", data: Buffer.from("<svg/>").toString("base64") }] });
    expect(((await svg.json()) as { error: string }).error).toMatch(/^images\[0\]\.mimeType: expected one of "image\/png"/);
    const dataUrl = await send({ content: "x", images: [{ mimeType: "image/png", data: `data:image/png;base64,${PNG.subarray(0, 16).toString("base64")}` }] });
    expect(((await dataUrl.json()) as { error: string }).error).toMatch(/^images\[0\]\.data: expected base64 \(the image's bytes, without a data: prefix\)/);
    const image = { mimeType: "image/png", data: PNG.subarray(0, 64).toString("base64") };
    const many = await send({ content: "x", images: [image, image, image, image, image] });
    expect(((await many.json()) as { error: string }).error).toMatch(/^images: expected at most 4/);
    expect(await readdir(mediaDirectory)).toEqual([]);
  });

  it("refuses images when the channel keeps no files", async () => {
    const { send } = await start({ media: false });
    const response = await send({ content: "x", images: [{ mimeType: "image/png", data: PNG.subarray(0, 64).toString("base64") }] });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: "images: this web channel keeps no files, so it takes no images" });
  });
});
