import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createMemoryStore } from "../../src/agent/memory.js";
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

describe("memory store", () => {
  it("keeps one file per chat in chat scope", async () => {
    const memory = createMemoryStore({ workspace, scope: "chat" });
    await memory.write("telegram:-100123", "likes tea");
    await memory.write("discord:42", "likes coffee");

    expect(memory.path("telegram:-100123")).toBe(path.join(workspace, "memory", "chats", "telegram%3A-100123", "MEMORY.md"));
    expect(await memory.read("telegram:-100123")).toBe("likes tea");
    expect(await memory.read("discord:42")).toBe("likes coffee");
    expect(await memory.read("cli:direct")).toBe("");
  });

  it("shares one file between all sessions in global scope", async () => {
    const memory = createMemoryStore({ workspace, scope: "global" });
    await memory.write("telegram:1", "shared fact");
    expect(memory.path("discord:2")).toBe(path.join(workspace, "memory", "MEMORY.md"));
    expect(await memory.read("discord:2")).toBe("shared fact");
  });

  it("keeps chat files inside memory/chats whatever the key", async () => {
    const memory = createMemoryStore({ workspace, scope: "chat" });
    for (const key of ["../../escape", "..", "/etc/passwd", "a\\..\\b"]) await memory.write(key, key);
    const files = await filesUnder(workspace);
    expect(files).toHaveLength(4);
    for (const file of files) expect(file).toMatch(/^memory\/chats\/[^/]+\/MEMORY\.md$/);
  });

  it("appends dated sections", async () => {
    let clock = NOON;
    const memory = createMemoryStore({ workspace, scope: "chat", now: () => clock });
    await memory.append("cli:direct", "User's name is Ada.");
    clock += 24 * 60 * 60 * 1000;
    await memory.append("cli:direct", "  Prefers metric units.\n");
    expect(await memory.read("cli:direct")).toBe(
      "## 2025-06-01 12:30 UTC\n\nUser's name is Ada.\n\n## 2025-06-02 12:30 UTC\n\nPrefers metric units.\n",
    );
  });

  it("serializes concurrent appends so none is lost", async () => {
    const memory = createMemoryStore({ workspace, scope: "chat", now: () => NOON });
    await Promise.all(Array.from({ length: 20 }, (_unused, index) => memory.append("cli:direct", `note ${index}`)));
    const content = await memory.read("cli:direct");
    for (let index = 0; index < 20; index++) expect(content).toContain(`note ${index}\n`);
  });

  it("searches case-insensitively with line numbers, the chat file first and then the global file", async () => {
    const memory = createMemoryStore({ workspace, scope: "chat" });
    await mkdir(path.join(workspace, "memory"), { recursive: true });
    await writeFile(path.join(workspace, "memory", "MEMORY.md"), "# Global\nThe office WiFi is 'Coffee'.\n");
    await memory.write("cli:direct", "# Chat\nfavourite drink: coffee\nnothing here\nCOFFEE beans from Kenya");
    await memory.write("cli:other", "coffee in another chat");

    expect(await memory.search("cli:direct", "Coffee")).toEqual([
      { file: "memory/chats/cli%3Adirect/MEMORY.md", line: 2, text: "favourite drink: coffee" },
      { file: "memory/chats/cli%3Adirect/MEMORY.md", line: 4, text: "COFFEE beans from Kenya" },
      { file: "memory/MEMORY.md", line: 2, text: "The office WiFi is 'Coffee'." },
    ]);
    expect(await memory.search("cli:direct", "tea")).toEqual([]);
    expect(await memory.search("cli:direct", "   ")).toEqual([]);
  });

  it("searches only the global file in global scope", async () => {
    const memory = createMemoryStore({ workspace, scope: "global" });
    await memory.write("any", "alpha\nbeta");
    expect(await memory.search("other", "BETA")).toEqual([{ file: "memory/MEMORY.md", line: 2, text: "beta" }]);
  });

  it("writes atomically, leaving no temporary files behind", async () => {
    const memory = createMemoryStore({ workspace, scope: "chat", now: () => NOON });
    await memory.write("cli:direct", "one");
    await memory.write("cli:direct", "two");
    await memory.append("cli:direct", "three");
    await memory.write("cli:other", "x");
    expect(await filesUnder(workspace)).toEqual(["memory/chats/cli%3Adirect/MEMORY.md", "memory/chats/cli%3Aother/MEMORY.md"]);
  });

  it("refuses a write or an append over the size cap and keeps the old content", async () => {
    const memory = createMemoryStore({ workspace, scope: "chat", maxBytes: 100, now: () => NOON });
    await memory.write("cli:direct", "small");
    await expect(memory.write("cli:direct", "x".repeat(101))).rejects.toThrow(/101 bytes, over its 100 bytes limit/);
    await expect(memory.append("cli:direct", "y".repeat(90))).rejects.toBeInstanceOf(ToolError);
    expect(await memory.read("cli:direct")).toBe("small");
    // Bytes, not characters: 40 three-byte characters are 120 bytes.
    await expect(memory.write("cli:direct", "€".repeat(40))).rejects.toThrow(/over its 100 bytes limit/);
    expect(await filesUnder(workspace)).toEqual(["memory/chats/cli%3Adirect/MEMORY.md"]);
  });

  it("caps at 64 KiB by default", async () => {
    const memory = createMemoryStore({ workspace, scope: "global" });
    await memory.write("k", "x".repeat(64 * 1024));
    await expect(memory.write("k", "x".repeat(64 * 1024 + 1))).rejects.toThrow(/64 KiB limit/);
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
    const memory = createMemoryStore({ workspace, scope: "chat", now: () => NOON });
    const tool = createMemoryTool(memory);

    expect(await tool.execute({ action: "read" }, context())).toMatch(/^Memory is empty \(memory\/chats\/cli%3Adirect\/MEMORY\.md\)/);
    expect(await tool.execute({ action: "write", content: "Name: Ada" }, context())).toBe(
      "Saved the memory (9 bytes) to memory/chats/cli%3Adirect/MEMORY.md.",
    );
    expect(await tool.execute({ action: "append", content: "Likes tea" }, context())).toMatch(/^Appended a dated note/);
    expect(await tool.execute({ action: "read" }, context())).toBe("Name: Ada\n\n## 2025-06-01 12:30 UTC\n\nLikes tea\n");
    expect(await tool.execute({ action: "search", query: "TEA" }, context())).toBe("memory/chats/cli%3Adirect/MEMORY.md:5: Likes tea");
    expect(await tool.execute({ action: "search", query: "tea" }, context("cli:other"))).toMatch(/^No memory lines contain "tea"/);
    expect(await tool.execute({ action: "write", content: "" }, context())).toMatch(/^Saved the memory \(0 bytes\)/);
  });

  it("throws a ToolError naming the missing argument", async () => {
    const tool = createMemoryTool(createMemoryStore({ workspace, scope: "chat" }));
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
    const registry = new ToolRegistry().register(createMemoryTool(createMemoryStore({ workspace, scope: "chat", maxBytes: 10 })));
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
  const memory = createMemoryStore({ workspace, scope: "global", now: () => NOON });
  await memory.append("cli:direct", "- fact");
  expect(await readFile(path.join(workspace, "memory", "MEMORY.md"), "utf8")).toBe("## 2025-06-01 12:30 UTC\n\n- fact\n");
});
