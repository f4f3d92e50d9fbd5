/** Walls in the shared tool machinery: oversized results and hard links. */
import { link, mkdir, mkdtemp, readdir, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createReadFileTool } from "../../../src/tools/read-file.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import { defineTool } from "../../../src/tools/tool.js";

let root: string;
let workspace: string;
let outside: string;

beforeEach(async () => {
  root = await realpath(await mkdtemp(path.join(tmpdir(), "countbot-walls-")));
  workspace = path.join(root, "workspace");
  outside = path.join(root, "outside");
  await mkdir(workspace);
  await mkdir(outside);
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const context = () => ({ sessionKey: "t:1", channel: "t", chatId: "1", workspace, restrictToWorkspace: true, signal: new AbortController().signal });

const loud = defineTool({ name: "loud", description: "returns a lot", parameters: z.object({}), execute: async () => "x".repeat(5_000) });

describe("tool result capping", () => {
  it("saves an oversized result inside the workspace and gives the model the head", async () => {
    const registry = new ToolRegistry({ maxResultChars: 1_000 }).register(loud);
    const outcome = await registry.execute({ id: "call-1", name: "loud", arguments: "{}" }, context());
    expect(outcome.content.length).toBeLessThanOrEqual(1_000);
    expect(outcome.content).toContain(".countbot/tool-results/call-1.txt");
    expect(await readdir(path.join(workspace, ".countbot", "tool-results"))).toEqual(["call-1.txt"]);
  });

  it("attack: refuses to write the overflow through a .countbot symlink pointing out", async () => {
    await symlink(outside, path.join(workspace, ".countbot"));
    const registry = new ToolRegistry({ maxResultChars: 1_000 }).register(loud);
    const outcome = await registry.execute({ id: "call-2", name: "loud", arguments: "{}" }, context());
    expect(outcome.success).toBe(false);
    expect(outcome.content).toMatch(/^Error: .*outside the workspace/);
    expect(await readdir(outside)).toEqual([]);
  });
});

describe("read_file and hard links", () => {
  it("attack: refuses a hard link to a file outside the workspace", async () => {
    await writeFile(path.join(outside, "shadow"), "root:secret-hash");
    await link(path.join(outside, "shadow"), path.join(workspace, "innocent.txt"));
    const registry = new ToolRegistry().register(createReadFileTool({ maxBytes: 10_000 }));
    const outcome = await registry.execute({ id: "c", name: "read_file", arguments: JSON.stringify({ path: "innocent.txt" }) }, context());
    expect(outcome.success).toBe(false);
    expect(outcome.content).not.toContain("secret-hash");
    expect(outcome.content).toContain("hard links");
  });
});
