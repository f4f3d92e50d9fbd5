/**
 * The file-access layer under attack from a concurrent process (what `exec` can run): directories
 * swapped for symlinks between the check and the open, special files that would block an open,
 * hard links, and the memory store's files replaced by links. The outside directory is a tripwire:
 * its content must never come back and nothing may appear in it.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { constants } from "node:fs";
import { link, mkdir, mkdtemp, open, readdir, readFile, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createFileMemoryStore } from "../../../src/memory/memory.js";
import { loadSkills } from "../../../src/agent/skills.js";
import { createEditFileTool } from "../../../src/tools/edit-file.js";
import { createListDirTool } from "../../../src/tools/list-dir.js";
import { createReadFileTool } from "../../../src/tools/read-file.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import type { ToolContext } from "../../../src/tools/tool.js";
import { createWriteFileTool } from "../../../src/tools/write-file.js";
import { allowed, attack } from "./attacks.js";

const SECRET = "TRIPWIRE outside content";
const ROUNDS = 400;

let root: string;
let workspace: string;
let tripwire: string;
let registry: ToolRegistry;
let context: ToolContext;
let swapper: ChildProcess | undefined;
let fifos: string[] = [];
let servers: Server[] = [];

beforeEach(async () => {
  root = await realpath(await mkdtemp(path.join(tmpdir(), "countbot-races-")));
  workspace = path.join(root, "workspace");
  tripwire = path.join(root, "tripwire");
  await mkdir(workspace);
  await mkdir(tripwire);
  await writeFile(path.join(tripwire, "f"), SECRET);
  await writeFile(path.join(tripwire, "tripwire-only-name"), SECRET);
  registry = new ToolRegistry()
    .register(createReadFileTool({ maxBytes: 10_000 }))
    .register(createWriteFileTool({ maxBytes: 10_000 }))
    .register(createEditFileTool({ maxBytes: 10_000 }))
    .register(createListDirTool());
  context = { sessionKey: "test:1", channel: "test", chatId: "1", workspace, restrictToWorkspace: true, signal: new AbortController().signal };
});

afterEach(async () => {
  swapper?.kill("SIGKILL");
  swapper = undefined;
  // A reader stuck in open() on a FIFO (the bug) is released by a writer showing up.
  for (const fifo of fifos) await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK).then((handle) => handle.close(), () => undefined);
  fifos = [];
  for (const server of servers) server.close();
  servers = [];
  await rm(root, { recursive: true, force: true });
});

async function call(name: string, args: Record<string, unknown>): Promise<{ content: string; success: boolean }> {
  return registry.execute({ id: "call-1", name, arguments: JSON.stringify(args) }, context);
}

/**
 * A process that keeps swapping `workspace/d` between a real directory (holding `f`, inside
 * content) and a symlink to the tripwire, as fast as it can, with short pauses in each state.
 */
async function startSwapper(): Promise<void> {
  await mkdir(path.join(workspace, "d"));
  await writeFile(path.join(workspace, "d", "f"), "inside content");
  await symlink(tripwire, path.join(workspace, "d.lnk"));
  const script = `
    const fs = require("fs");
    const [d, dir, lnk] = process.argv.slice(1);
    const pause = new Int32Array(new SharedArrayBuffer(4));
    const step = (from, to) => { try { fs.renameSync(from, to); } catch {} };
    process.stdout.write("ready\\n");
    for (;;) {
      step(d, dir); step(lnk, d);
      Atomics.wait(pause, 0, 0, Math.random() < 0.5 ? 0 : 1);
      step(d, lnk); step(dir, d);
      Atomics.wait(pause, 0, 0, Math.random() < 0.5 ? 0 : 1);
    }`;
  swapper = spawn(process.execPath, ["-e", script, path.join(workspace, "d"), path.join(workspace, "d.dir"), path.join(workspace, "d.lnk")], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve) => swapper!.stdout!.once("data", () => resolve()));
}

async function tripwireUntouched(): Promise<void> {
  expect((await readdir(tripwire)).sort()).toEqual(["f", "tripwire-only-name"]);
  expect(await readFile(path.join(tripwire, "f"), "utf8")).toBe(SECRET);
}

describe("a directory swapped for a symlink between the check and the open", () => {
  attack(`read_file never returns an outside byte (${ROUNDS} reads against a swapping process)`, async () => {
    await startSwapper();
    let inside = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const outcome = await call("read_file", { path: "d/f" });
      expect(outcome.content).not.toContain("TRIPWIRE");
      if (outcome.success) inside += 1;
    }
    expect(inside).toBeGreaterThan(0);
    await tripwireUntouched();
  });

  attack(`list_dir never lists the outside directory (${ROUNDS} listings)`, async () => {
    await startSwapper();
    for (let round = 0; round < ROUNDS; round++) {
      const outcome = await call("list_dir", { path: "d" });
      expect(outcome.content).not.toContain("tripwire-only-name");
    }
    await tripwireUntouched();
  });

  attack(`write_file and edit_file never create or leave a file outside (${ROUNDS} writes)`, async () => {
    await startSwapper();
    for (let round = 0; round < ROUNDS; round++) {
      await call("write_file", { path: `d/new-${round % 5}.txt`, content: `round ${round}` });
      const edited = await call("edit_file", { path: "d/f", old_text: "content", new_text: "content" });
      expect(edited.content).not.toContain("TRIPWIRE");
    }
    swapper?.kill("SIGKILL");
    await tripwireUntouched();
  });
});

describe("special files are refused at once, without blocking anyone", () => {
  attack("eight reads of FIFOs are refused while another chat's read proceeds", async () => {
    for (let index = 0; index < 8; index++) {
      const fifo = path.join(workspace, `pipe-${index}`);
      expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
      fifos.push(fifo);
    }
    await writeFile(path.join(workspace, "notes.txt"), "other chat's notes");
    const refused = Promise.all(fifos.map((fifo) => call("read_file", { path: path.basename(fifo) })));
    const other = await call("read_file", { path: "notes.txt" });
    expect(other).toMatchObject({ success: true, content: "other chat's notes" });
    for (const outcome of await refused) {
      expect(outcome.success).toBe(false);
      expect(outcome.content).toMatch(/not a regular file/);
    }
    const edits = await Promise.all(fifos.map((fifo) => call("edit_file", { path: path.basename(fifo), old_text: "a", new_text: "b" })));
    for (const outcome of edits) expect(outcome.content).toMatch(/not a regular file/);
  });

  attack("a FIFO listed as a directory, and a socket read, are refused", async () => {
    const fifo = path.join(workspace, "pipe");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    fifos.push(fifo);
    expect((await call("list_dir", { path: "pipe" })).content).toMatch(/not a directory/);
    const socket = path.join(workspace, "sock");
    const server = createServer();
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    expect((await call("read_file", { path: "sock" })).content).toMatch(/not a regular file/);
  });

  attack("a FIFO planted as a skill's SKILL.md is reported, not waited on", async () => {
    await mkdir(path.join(workspace, "skills", "stall"), { recursive: true });
    const fifo = path.join(workspace, "skills", "stall", "SKILL.md");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    fifos.push(fifo);
    const loaded = await loadSkills(workspace);
    expect(loaded.skills).toEqual([]);
    expect(loaded.errors[0]?.message).toMatch(/not a regular file/);
  });

  it.skipIf(process.getuid?.() !== 0)("attack: a character device made with mknod is refused (root only)", async () => {
    expect(spawnSync("mknod", [path.join(workspace, "zero"), "c", "1", "5"]).status).toBe(0);
    expect((await call("read_file", { path: "zero" })).content).toMatch(/not a regular file/);
    expect((await call("edit_file", { path: "zero", old_text: "a", new_text: "b" })).content).toMatch(/not a regular file/);
  });
});

describe("hard links", () => {
  attack("edit_file through a hard link to an outside file is refused and copies nothing in", async () => {
    await link(path.join(tripwire, "f"), path.join(workspace, "linked.txt"));
    const outcome = await call("edit_file", { path: "linked.txt", old_text: "TRIPWIRE", new_text: "TRIPWIRE" });
    expect(outcome.success).toBe(false);
    expect(outcome.content).toMatch(/hard links/);
    expect(outcome.content).not.toContain("outside content");
    await tripwireUntouched();
  });
});

describe("the memory store goes through the same wall", () => {
  attack("a MEMORY.md replaced by a symlink to an outside file is neither read nor written through", async () => {
    const memory = createFileMemoryStore({ workspace, scope: "global" });
    await mkdir(path.join(workspace, "memory"));
    await symlink(path.join(tripwire, "f"), path.join(workspace, "memory", "MEMORY.md"));
    await expect(memory.read("web:1")).rejects.toThrow(/outside the workspace/);
    await expect(memory.append("web:1", "note")).rejects.toThrow(/outside the workspace/);
    expect((await memory.search("web:1", "TRIPWIRE").catch(() => []))).toEqual([]);
    await tripwireUntouched();
  });

  attack("a chat's memory directory replaced by a symlink to an outside directory", async () => {
    const memory = createFileMemoryStore({ workspace, scope: "chat" });
    const chatDirectory = path.dirname(path.join(workspace, memory.location("web:1")));
    await mkdir(path.dirname(chatDirectory), { recursive: true });
    await symlink(tripwire, chatDirectory);
    await expect(memory.write("web:1", "pwned")).rejects.toThrow(/outside the workspace/);
    await expect(memory.read("web:1")).rejects.toThrow(/outside the workspace/);
    await tripwireUntouched();
  });

  allowed("the memory store still reads, appends and creates its directories", async () => {
    const memory = createFileMemoryStore({ workspace, scope: "chat", now: () => 0 });
    await memory.append("web:1", "likes tea");
    expect(await memory.read("web:1")).toContain("likes tea");
  });
});
