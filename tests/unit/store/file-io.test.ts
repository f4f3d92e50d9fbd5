import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { OverSizeError, saveStream, writeFileAtomic } from "../../../src/store/file-io.js";

let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(path.join(os.tmpdir(), "countbot-file-io-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

describe("writeFileAtomic", () => {
  it("replaces the content, returns the bytes written and leaves no temp file", async () => {
    const file = path.join(directory, "state.json");
    await writeFile(file, "old");
    expect(await writeFileAtomic(file, "nëw")).toBe(4);
    expect(await readFile(file, "utf8")).toBe("nëw");
    expect(await readdir(directory)).toEqual(["state.json"]);
  });

  it("leaves the old content and no temp file when beforeWrite refuses", async () => {
    const file = path.join(directory, "state.json");
    await writeFile(file, "old");
    const refused = writeFileAtomic(file, "new", {
      beforeWrite: async () => {
        throw new Error("not here");
      },
    });
    await expect(refused).rejects.toThrow("not here");
    expect(await readFile(file, "utf8")).toBe("old");
    expect(await readdir(directory)).toEqual(["state.json"]);
  });

  it("creates a new file with the mode asked for", async () => {
    const file = path.join(directory, "secret.json");
    await writeFileAtomic(file, "{}", { mode: 0o600 });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });
});

describe("saveStream", () => {
  it("writes what arrives under the cap and shows the file only once it is whole", async () => {
    const target = path.join(directory, "report.pdf");
    await saveStream(Readable.from([Buffer.from("%PDF "), Buffer.from("a small report")]), target, 100);
    expect(await readFile(target, "utf8")).toBe("%PDF a small report");
    expect(await readdir(directory)).toEqual(["report.pdf"]);
  });

  it("stops past the cap with OverSizeError and leaves no file, even when the first chunk is already over it", async () => {
    // Refused on the first chunk, the pipeline fails while the file may still be opening: 50 times,
    // none may be left behind.
    for (let attempt = 0; attempt < 50; attempt += 1) {
      const error = await saveStream(Readable.from([randomBytes(5_000)]), path.join(directory, `big-${attempt}.bin`), 1_000).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(OverSizeError);
    }
    const spread = await saveStream(Readable.from([randomBytes(600), randomBytes(600)]), path.join(directory, "spread.bin"), 1_000).catch((caught: unknown) => caught);
    expect(spread).toBeInstanceOf(OverSizeError);
    expect(await readdir(directory)).toEqual([]);
  });

  it("leaves no file when the source fails or the signal aborts", async () => {
    const failing = new Readable({
      read() {
        this.destroy(new Error("connection reset"));
      },
    });
    await expect(saveStream(failing, path.join(directory, "cut.bin"), 1_000)).rejects.toThrow("connection reset");
    const controller = new AbortController();
    controller.abort();
    await expect(saveStream(Readable.from([Buffer.from("x")]), path.join(directory, "aborted.bin"), 1_000, controller.signal)).rejects.toThrow();
    expect(await readdir(directory)).toEqual([]);
  });
});
