/** The channel kit's own pieces: the scrubber, capped downloads, retries and the webhook helpers. */
import { existsSync } from "node:fs";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { TooBigError, backoffDelay, checkJsonBody, createScrubber, headerValue, sameSecret, saveDownload, scrubError, withRetries } from "../../../src/gateway/kit/index.js";

const roots: string[] = [];
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

describe("createScrubber", () => {
  it("replaces each secret as is and URL-encoded, and the shapes it is given, in messages and in errors' causes", () => {
    const scrub = createScrubber(["abc:DEF/123", undefined, "no"], { replacement: "[token]", patterns: [/\bt-[\w-]{16,}/] });
    expect(scrub("url /botabc:DEF/123/getMe and abc%3ADEF%2F123, t-0123456789abcdefXYZ, no")).toBe("url /bot[token]/getMe and [token], [token], no");
    const error = new Error("outer abc:DEF/123", { cause: new Error("inner abc%3ADEF%2F123") });
    scrubError(error, scrub);
    expect(error.message).toBe("outer [token]");
    expect((error.cause as Error).message).toBe("inner [token]");
    expect(error.stack).not.toContain("abc:DEF/123");
  });
});

describe("saveDownload", () => {
  async function directory(): Promise<string> {
    const root = await mkdtemp(path.join(tmpdir(), "countbot-kit-"));
    roots.push(root);
    return root;
  }

  it("keeps a file within the cap whole, from a Node stream or a fetch body", async () => {
    const root = await directory();
    await saveDownload(Readable.from([Buffer.from("hello "), Buffer.from("world")]), path.join(root, "a"), { maxBytes: 11 });
    await saveDownload(new Response("web body").body!, path.join(root, "b"), { maxBytes: 100 });
    expect(await readFile(path.join(root, "a"), "utf8")).toBe("hello world");
    expect(await readFile(path.join(root, "b"), "utf8")).toBe("web body");
  });

  it("refuses past the cap, announced or counted, and leaves nothing behind", async () => {
    const root = await directory();
    const announced = saveDownload(Readable.from([Buffer.from("x")]), path.join(root, "a"), { maxBytes: 10, announcedBytes: 11 });
    await expect(announced).rejects.toMatchObject({ name: "TooBigError", bytes: 11, maxBytes: 10 });
    const counted = saveDownload(Readable.from([Buffer.alloc(6), Buffer.alloc(6)]), path.join(root, "b"), { maxBytes: 10, announcedBytes: 5 });
    await expect(counted).rejects.toBeInstanceOf(TooBigError);
    expect(existsSync(path.join(root, "a")) || existsSync(path.join(root, "b"))).toBe(false);
    expect(await readdir(root)).toEqual([]);
  });
});

describe("withRetries", () => {
  it("tries until it works, with doubling pauses capped, told of each retry", async () => {
    const slept: number[] = [];
    const retried: number[] = [];
    let calls = 0;
    const result = await withRetries(
      async (attempt) => {
        calls += 1;
        if (attempt < 4) throw new Error(`failure ${attempt}`);
        return "done";
      },
      { baseDelayMs: 100, maxDelayMs: 250, jitter: 0, sleep: async (ms) => void slept.push(ms), onRetry: (_error, attempt) => retried.push(attempt) },
    );
    expect(result).toBe("done");
    expect(calls).toBe(4);
    expect(slept).toEqual([100, 200, 250]);
    expect(retried).toEqual([1, 2, 3]);
    expect(backoffDelay(3, 100, 1_000)).toBe(400);
  });

  it("gives up after its attempts, on a failure that is not retryable, and when the signal aborts", async () => {
    const noSleep = async () => undefined;
    let calls = 0;
    await expect(withRetries(async () => { calls += 1; throw new Error("always"); }, { attempts: 3, sleep: noSleep })).rejects.toThrow("always");
    expect(calls).toBe(3);
    calls = 0;
    await expect(withRetries(async () => { calls += 1; throw new Error("fatal"); }, { retryable: () => false, sleep: noSleep })).rejects.toThrow("fatal");
    expect(calls).toBe(1);
    const controller = new AbortController();
    calls = 0;
    const aborted = withRetries(async () => { calls += 1; throw new Error("down"); }, { baseDelayMs: 60_000, signal: controller.signal });
    controller.abort();
    await expect(aborted).rejects.toThrow("down");
    expect(calls).toBe(1);
  });
});

describe("webhook helpers", () => {
  it("compare secrets, read headers of any shape, and name the first bad field of a body", () => {
    expect(sameSecret("s3cret", "s3cret")).toBe(true);
    expect(sameSecret("s3cret", "s3cret-longer")).toBe(false);
    expect(headerValue({ "X-Signature": ["a", "b"] }, "x-signature")).toBe("a");
    expect(headerValue(new Headers({ "x-signature": "c" }), "X-Signature")).toBe("c");
    const schema = z.object({ message: z.object({ id: z.number() }) });
    expect(checkJsonBody(schema, Buffer.from('{"message":{"id":1}}'))).toEqual({ success: true, data: { message: { id: 1 } } });
    expect(checkJsonBody(schema, "{not json")).toEqual({ success: false, error: "body: expected JSON" });
    const bad = checkJsonBody(schema, '{"message":{"id":"x"}}');
    expect(bad.success).toBe(false);
    expect(bad.success ? "" : bad.error).toMatch(/^message\.id: /);
  });
});
