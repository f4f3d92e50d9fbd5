import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createFileMemoryStore } from "../../src/memory/memory.js";
import { ToolError } from "../../src/errors.js";
import { createMemoryTool } from "../../src/agent/memory-tool.js";
import { ToolRegistry } from "../../src/tools/registry.js";
import type { ToolContext } from "../../src/tools/tool.js";

const NOON = Date.UTC(2025, 5, 1, 12, 30);

let workspace: string;

beforeEach(async () => {
  workspace = await mkdtemp(path.join(os.tmpdir(), "countbot-memory-"));
});

afterEach(async () => {
  await rm(workspace, { recursive: true, force: true });
});

/** Every file under the workspace, relative, with `/` separators. */
async function filesUnder(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true, withFileTypes: true });
  return entries
    .filter((item) => item.isFile())
    .map((item) => path.relative(directory, path.join(item.parentPath, item.name)).split(path.sep).join("/"))
    .sort();
}

describe("file memory store (the contract itself: tests/conformance/memory.suite.ts)", () => {
  it("keeps chat files under memory/chats and the global one at memory/MEMORY.md", async () => {
    const chats = createFileMemoryStore({ workspace, scope: "chat" });
    await chats.write("telegram:-100123", "likes tea");
    await createFileMemoryStore({ workspace, scope: "global" }).write("discord:2", "shared fact");
    expect(await readFile(path.join(workspace, "memory", "chats", "telegram%3A-100123", "MEMORY.md"), "utf8")).toBe("likes tea");
    expect(await readFile(path.join(workspace, "memory", "MEMORY.md"), "utf8")).toBe("shared fact");
  });

  it("keeps chat files inside memory/chats whatever the key", async () => {
    const memory = createFileMemoryStore({ workspace, scope: "chat" });
    for (const key of ["../../escape", "..", "/etc/passwd", "a\\..\\b"]) await memory.write(key, key);
    const files = await filesUnder(workspace);
    expect(files).toHaveLength(4);
    for (const file of files) expect(file).toMatch(/^memory\/chats\/[^/]+\/MEMORY\.md$/);
  });

  it("writes atomically, leaving no temporary or lock files behind", async () => {
    const memory = createFileMemoryStore({ workspace, scope: "chat", now: () => NOON });
    await memory.write("cli:direct", "one");
    await memory.write("cli:direct", "two");
    await memory.append("cli:direct", "three");
    await memory.write("cli:other", "x");
    expect(await filesUnder(workspace)).toEqual(["memory/chats/cli%3Adirect/MEMORY.md", "memory/chats/cli%3Aother/MEMORY.md"]);
  });

  it("keeps an archived memory as a file beside the current one", async () => {
    const memory = createFileMemoryStore({ workspace, scope: "chat", now: () => NOON });
    await memory.write("cli:direct", "old facts");
    await memory.archive("cli:direct");
    expect(await readFile(path.join(workspace, "memory", "chats", "cli%3Adirect", `MEMORY-until-2025-06-01-${NOON}.md`), "utf8")).toBe("old facts");
  });

  it("takes over a lock file left by a crashed process", async () => {
    await mkdir(path.join(workspace, "memory"), { recursive: true });
    const lock = path.join(workspace, "memory", "MEMORY.md.lock");
    await writeFile(lock, "12345\n");
    const memory = createFileMemoryStore({ workspace, scope: "global", staleLockMs: 30, now: () => NOON });
    await memory.append("any", "fact");
    expect(await memory.read("any")).toContain("fact");
    expect(await filesUnder(workspace)).toEqual(["memory/MEMORY.md"]);
  });
});

describe("memory tool", () => {
  const context = (sessionKey = "cli:direct"): ToolContext => ({
    sessionKey,
    channel: "cli",
    chatId: "direct",
    workspace,
    restrictToWorkspace: true,
    signal: new AbortController().signal,
  });

  it("reads, writes, appends and searches the calling session's memory", async () => {
    const memory = createFileMemoryStore({ workspace, scope: "chat", now: () => NOON });
    const tool = createMemoryTool(memory);

    expect(await tool.execute({ action: "read" }, context())).toMatch(/^Memory is empty \(this chat's memory, memory\/chats\/cli%3Adirect\/MEMORY\.md\)/);
    expect(await tool.execute({ action: "write", content: "Name: Ada" }, context())).toBe(
      "Saved the memory (9 bytes) to this chat's memory, memory/chats/cli%3Adirect/MEMORY.md.",
    );
    expect(await tool.execute({ action: "append", content: "Likes tea" }, context())).toMatch(/^Appended a dated note/);
    expect(await tool.execute({ action: "read" }, context())).toBe("Name: Ada\n\n## 2025-06-01 12:30 UTC\n\nLikes tea\n");
    expect(await tool.execute({ action: "search", query: "TEA" }, context())).toBe("memory/chats/cli%3Adirect/MEMORY.md:5: Likes tea");
    expect(await tool.execute({ action: "search", query: "tea" }, context("cli:other"))).toMatch(/^No memory lines contain "tea"/);
    expect(await tool.execute({ action: "write", content: "" }, context())).toMatch(/^Saved the memory \(0 bytes\)/);
  });

  it("throws a ToolError naming the missing argument", async () => {
    const tool = createMemoryTool(createFileMemoryStore({ workspace, scope: "chat" }));
    const cases = [
      [{ action: "write" }, "`content` is required for action \"write\""],
      [{ action: "append" }, "`content` is required for action \"append\""],
      [{ action: "append", content: "  " }, "`content` is required for action \"append\""],
      [{ action: "search" }, "`query` is required for action \"search\""],
      [{ action: "search", query: "" }, "`query` is required for action \"search\""],
    ] as const;
    for (const [args, message] of cases) {
      const error = await tool.execute(args, context()).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(ToolError);
      expect((error as ToolError).message).toBe(message);
      expect((error as ToolError).hint).toMatch(/^Send .* in `(content|query)`\.$/);
    }
  });

  it("gives the model error values it can act on through the registry", async () => {
    const registry = new ToolRegistry().register(createMemoryTool(createFileMemoryStore({ workspace, scope: "chat", maxBytes: 10 })));
    const call = (argumentsText: string) => registry.execute({ id: "call-1", name: "memory", arguments: argumentsText }, context());

    const missing = await call(JSON.stringify({ action: "write", content: null }));
    expect(missing.success).toBe(false);
    expect(missing.content).toBe(
      'Error: `content` is required for action "write". Next: Send the whole new memory text in `content`.',
    );
    const tooBig = await call(JSON.stringify({ action: "write", content: "x".repeat(11) }));
    expect(tooBig.content).toMatch(/^Error: the memory file .* would be 11 bytes, over its 10 bytes limit.*Next: Condense it/);
    const badAction = await call(JSON.stringify({ action: "delete" }));
    expect(badAction.content).toMatch(/^Error: invalid arguments for memory: `action`/);
  });
});

it("leaves the workspace's memory file readable as plain Markdown", async () => {
  const memory = createFileMemoryStore({ workspace, scope: "global", now: () => NOON });
  await memory.append("cli:direct", "- fact");
  expect(await readFile(path.join(workspace, "memory", "MEMORY.md"), "utf8")).toBe("## 2025-06-01 12:30 UTC\n\n- fact\n");
});
