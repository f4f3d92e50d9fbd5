/**
 * bin/countbot.js runs dist/ only while it is current: built after the last change to a source.
 */
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
// @ts-expect-error: plain JavaScript without types (it runs before anything is compiled)
import { buildIsCurrent } from "../../bin/build-current.js";

const roots: string[] = [];
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

async function checkout(): Promise<string> {
  const root = await mkdtemp(path.join(tmpdir(), "countbot-bin-"));
  roots.push(root);
  await mkdir(path.join(root, "src", "bus", "lua"), { recursive: true });
  await mkdir(path.join(root, "channels", "web"), { recursive: true });
  await writeFile(path.join(root, "src", "bus", "lua", "ack-7.lua"), "return 1\n");
  await writeFile(path.join(root, "channels", "web", "plugin.ts"), "export {};\n");
  return root;
}

const at = (seconds: number) => new Date(1_700_000_000_000 + seconds * 1000);

describe("buildIsCurrent", () => {
  it("is false without a build", async () => {
    expect(buildIsCurrent(await checkout())).toBe(false);
  });

  it("is true for a build newer than every source, false once any source (at any depth) changes", async () => {
    const root = await checkout();
    await mkdir(path.join(root, "dist"));
    const stamp = path.join(root, "dist", "build-stamp.json");
    await writeFile(stamp, "{}\n");
    for (const file of ["src/bus/lua/ack-7.lua", "channels/web/plugin.ts"]) await utimes(path.join(root, file), at(0), at(0));
    await utimes(stamp, at(10), at(10));
    expect(buildIsCurrent(root)).toBe(true);
    await utimes(path.join(root, "src", "bus", "lua", "ack-7.lua"), at(20), at(20));
    expect(buildIsCurrent(root)).toBe(false);
  });
});

describe("bin/countbot.js output", () => {
  it("ends quietly when the reader closes the pipe early (`countbot --help | head -1`)", async () => {
    const { spawn } = await import("node:child_process");
    const bin = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../bin/countbot.js");
    const child = spawn(process.execPath, [bin, "--help"], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    // Our end closed before the help is written, as `head -1` closes it after its line.
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.on("close", (exitCode) => resolve(exitCode)));
    expect(stderr).not.toContain("EPIPE");
    expect(code).toBe(0);
  });
});
