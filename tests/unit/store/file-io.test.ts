import { mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeFileAtomic } from "../../../src/store/file-io.js";

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
