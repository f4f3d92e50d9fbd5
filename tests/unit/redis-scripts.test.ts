import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadScript, runScript } from "../../src/redis/scripts.js";
import { redisUrl } from "../support/redis.js";

let directory: string;
let redis: Redis;

beforeAll(() => {
  directory = mkdtempSync(path.join(tmpdir(), "countbot-lua-"));
  mkdirSync(path.join(directory, "includes"));
  writeFileSync(path.join(directory, "includes", "double.lua"), '--- @include "half"\nlocal function double(x) return x * 2 end\n');
  writeFileSync(path.join(directory, "includes", "half.lua"), "local function half(x) return x / 2 end\n");
  redis = new Redis(redisUrl);
});
afterAll(async () => {
  rmSync(directory, { recursive: true, force: true });
  await redis.quit();
});

function write(file: string, source: string): void {
  writeFileSync(path.join(directory, file), source);
}

describe("loadScript", () => {
  it("splices an include in place of its line, nested includes relative to the including file", () => {
    write("twice-1.lua", '-- KEYS[1] unused\n--- @include "includes/double"\nreturn double(tonumber(ARGV[1]))\n');
    const script = loadScript(directory, "twice-1.lua");
    expect(script.name).toBe("twice");
    expect(script.keyCount).toBe(1);
    expect(script.source).toBe(
      "-- KEYS[1] unused\nlocal function half(x) return x / 2 end\nlocal function double(x) return x * 2 end\nreturn double(tonumber(ARGV[1]))\n",
    );
  });

  it("splices a file once, however often it is included", () => {
    write("both-0.lua", '--- @include "includes/half.lua"\n--- @include "includes/double"\nreturn half(4)\n');
    const { source } = loadScript(directory, "both-0.lua");
    expect(source.match(/local function half/g)).toHaveLength(1);
    expect(source).not.toContain("@include");
  });

  it("fails loudly on a missing include", () => {
    write("broken-0.lua", '--- @include "includes/nowhere"\nreturn 1\n');
    expect(() => loadScript(directory, "broken-0.lua")).toThrow(/includes "includes\/nowhere", which does not exist/);
  });

  it("computes the sha over the spliced source, the one Redis runs", async () => {
    // A source of its own, so Redis has not seen it: EVALSHA fails with NOSCRIPT, runScript falls
    // back to EVAL, and Redis caches the script under the sha of what it ran.
    write("twice-1.lua", `-- ${randomUUID()}\n--- @include "includes/double"\nreturn double(tonumber(ARGV[1]))\n`);
    const script = loadScript(directory, "twice-1.lua");
    expect(await redis.script("EXISTS", script.sha)).toEqual([0]);
    expect(await runScript(redis, script, ["unused"], [21])).toBe(42);
    expect(await redis.script("EXISTS", script.sha)).toEqual([1]);
  });

  it("leaves no include line in the project's scripts", () => {
    for (const folder of ["../../src/bus/lua/", "../../src/store/lua/"]) {
      const root = new URL(folder, import.meta.url);
      for (const file of readdirSync(root).filter((name) => name.endsWith(".lua"))) {
        expect(loadScript(root, file).source, file).not.toMatch(/^--- @include/m);
      }
    }
  });
});
