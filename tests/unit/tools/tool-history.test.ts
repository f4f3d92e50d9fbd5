import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type ToolHistoryInput, createToolHistory } from "../../../src/tools/tool-history.js";

let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(path.join(os.tmpdir(), "countbot-tool-history-"));
});

afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

function call(overrides: Partial<ToolHistoryInput> = {}): ToolHistoryInput {
  return {
    sessionKey: "telegram:-100",
    tool: "read_file",
    arguments: { path: "notes.md" },
    userMessage: "what is in my notes?",
    result: "buy milk",
    durationMs: 7,
    success: true,
    ...overrides,
  };
}

/** A clock that ticks once per call. */
function ticking(start = 1_000): () => number {
  let time = start;
  return () => time++;
}

describe("tool history", () => {
  it("lists a session's calls newest first, filtered by tool and limited", async () => {
    const history = createToolHistory({ directory, now: ticking() });
    await history.add(call({ tool: "read_file", arguments: { path: "a.md" } }));
    await history.add(call({ tool: "exec", arguments: { command: "ls" }, success: false, result: "Error: denied." }));
    await history.add(call({ tool: "read_file", arguments: { path: "b.md" } }));

    expect(await history.list("telegram:-100")).toEqual([
      { at: 1_002, tool: "read_file", arguments: { path: "b.md" }, userMessage: "what is in my notes?", result: "buy milk", durationMs: 7, success: true },
      { at: 1_001, tool: "exec", arguments: { command: "ls" }, userMessage: "what is in my notes?", result: "Error: denied.", durationMs: 7, success: false },
      { at: 1_000, tool: "read_file", arguments: { path: "a.md" }, userMessage: "what is in my notes?", result: "buy milk", durationMs: 7, success: true },
    ]);
    expect((await history.list("telegram:-100", { tool: "read_file" })).map((entry) => entry.arguments)).toEqual([{ path: "b.md" }, { path: "a.md" }]);
    expect((await history.list("telegram:-100", { limit: 1 })).map((entry) => entry.tool)).toEqual(["read_file"]);
    expect(await history.list("telegram:-100", { tool: "web_fetch" })).toEqual([]);
    await history.close();
  });

  it("keeps sessions apart, one safely named file each", async () => {
    const history = createToolHistory({ directory });
    await history.add(call({ sessionKey: "telegram:-100" }));
    await history.add(call({ sessionKey: "discord:../../etc", tool: "exec" }));

    expect((await history.list("discord:../../etc")).map((entry) => entry.tool)).toEqual(["exec"]);
    expect((await history.list("telegram:-100")).map((entry) => entry.tool)).toEqual(["read_file"]);
    expect(await history.list("cli:direct")).toEqual([]);
    expect((await readdir(directory)).sort()).toEqual(["discord%3A%2E%2E%2F%2E%2E%2Fetc.jsonl", "telegram%3A-100.jsonl"]);
    await history.close();
  });

  it("caps results, user messages and string arguments", async () => {
    const history = createToolHistory({ directory, maxTextChars: 100 });
    await history.add(call({ result: "r".repeat(5_000), userMessage: "u".repeat(300), arguments: { content: "c".repeat(20_000) } }));
    const [entry] = await history.list("telegram:-100");
    expect(entry?.result).toBe(`${"r".repeat(100)}…[4900 more characters]`);
    expect(entry?.userMessage).toBe(`${"u".repeat(100)}…[200 more characters]`);
    expect((entry?.arguments as { content: string }).content.length).toBeLessThan(1_100);
    await history.close();
  });

  it("redacts secrets from what it stores", async () => {
    const history = createToolHistory({ directory, secrets: ["known-secret-123456"] });
    await history.add(
      call({
        arguments: { url: "https://x.test", apiKey: "argument-key-abcdef" },
        userMessage: "use known-secret-123456",
        result: "Authorization: Bearer header-token-xyz12345",
      }),
    );
    await history.close();
    const text = await readFile(path.join(directory, "telegram%3A-100.jsonl"), "utf8");
    for (const leak of ["known-secret-123456", "argument-key-abcdef", "header-token-xyz12345"]) expect(text).not.toContain(leak);
  });

  it("keeps the last maxEntries calls, compacting once the file holds twice as many", async () => {
    const history = createToolHistory({ directory, maxEntries: 3 });
    const lineCount = async () => (await readFile(path.join(directory, "telegram%3A-100.jsonl"), "utf8")).split("\n").filter(Boolean).length;
    for (let index = 0; index < 6; index++) await history.add(call({ arguments: { index } }));
    expect(await lineCount()).toBe(6);
    await history.add(call({ arguments: { index: 6 } }));
    expect(await lineCount()).toBe(3);
    expect((await history.list("telegram:-100")).map((entry) => entry.arguments)).toEqual([{ index: 6 }, { index: 5 }, { index: 4 }]);
    for (let index = 7; index < 20; index++) await history.add(call({ arguments: { index } }));
    expect(await lineCount()).toBeLessThanOrEqual(6);
    expect((await history.list("telegram:-100", { limit: 3 })).map((entry) => entry.arguments)).toEqual([{ index: 19 }, { index: 18 }, { index: 17 }]);
    await history.close();
  });

  it("counts what a previous process left, so the cap holds across restarts", async () => {
    const first = createToolHistory({ directory, maxEntries: 2 });
    for (let index = 0; index < 4; index++) await first.add(call({ arguments: { index } }));
    await first.close();

    const second = createToolHistory({ directory, maxEntries: 2 });
    await second.add(call({ arguments: { index: 4 } }));
    expect((await second.list("telegram:-100")).map((entry) => entry.arguments)).toEqual([{ index: 4 }, { index: 3 }]);
    await second.close();
  });

  it("serializes concurrent adds to one session", async () => {
    const history = createToolHistory({ directory, maxEntries: 1_000 });
    await Promise.all(Array.from({ length: 50 }, (_, index) => history.add(call({ arguments: { index } }))));
    const indexes = (await history.list("telegram:-100")).map((entry) => (entry.arguments as { index: number }).index);
    expect(indexes.sort((left, right) => left - right)).toEqual(Array.from({ length: 50 }, (_, index) => index));
    await history.close();
  });

  it("skips a torn or corrupt line and keeps appending whole lines", async () => {
    await writeFile(path.join(directory, "telegram%3A-100.jsonl"), 'not json\n{"at":1,"tool":"exec"');
    const history = createToolHistory({ directory });
    await history.add(call());
    expect((await history.list("telegram:-100")).map((entry) => entry.tool)).toEqual(["read_file"]);
    await history.close();
  });

  it("clears a session", async () => {
    const history = createToolHistory({ directory });
    await history.add(call());
    await history.add(call({ sessionKey: "discord:1" }));
    await history.clear("telegram:-100");
    expect(await history.list("telegram:-100")).toEqual([]);
    expect(await history.list("discord:1")).toHaveLength(1);
    await history.add(call());
    expect(await history.list("telegram:-100")).toHaveLength(1);
    await history.close();
  });

  it("refuses work after close", async () => {
    const history = createToolHistory({ directory });
    await history.close();
    await expect(history.add(call())).rejects.toThrow(/closed/);
  });
});
