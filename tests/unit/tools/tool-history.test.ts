import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type ToolHistoryInput, createFileToolHistory } from "../../../src/tools/tool-history.js";

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

describe("file tool history (the contract itself: tests/conformance/tool-history.suite.ts)", () => {
  it("keeps sessions apart, one safely named file each", async () => {
    const history = createFileToolHistory({ directory });
    await history.add(call({ sessionKey: "telegram:-100" }));
    await history.add(call({ sessionKey: "discord:../../etc", tool: "exec" }));

    expect((await history.list("discord:../../etc")).map((entry) => entry.tool)).toEqual(["exec"]);
    expect((await history.list("telegram:-100")).map((entry) => entry.tool)).toEqual(["read_file"]);
    expect(await history.list("cli:direct")).toEqual([]);
    expect((await readdir(directory)).sort()).toEqual(["discord%3A%2E%2E%2F%2E%2E%2Fetc.jsonl", "telegram%3A-100.jsonl"]);
    await history.close();
  });

  it("keeps the last maxEntries calls, compacting once the file holds twice as many", async () => {
    const history = createFileToolHistory({ directory, maxEntries: 3 });
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
    const first = createFileToolHistory({ directory, maxEntries: 2 });
    for (let index = 0; index < 4; index++) await first.add(call({ arguments: { index } }));
    await first.close();

    const second = createFileToolHistory({ directory, maxEntries: 2 });
    await second.add(call({ arguments: { index: 4 } }));
    expect((await second.list("telegram:-100")).map((entry) => entry.arguments)).toEqual([{ index: 4 }, { index: 3 }]);
    await second.close();
  });

  it("keeps the cap when it remembers the counts of fewer sessions than it writes (a forgotten count is read again)", async () => {
    const history = createFileToolHistory({ directory, maxEntries: 2, countedSessions: 1 });
    const lineCount = async (file: string) => (await readFile(path.join(directory, file), "utf8")).split("\n").filter(Boolean).length;
    for (let index = 0; index < 9; index++) {
      await history.add(call({ sessionKey: "web:a", arguments: { index } }));
      await history.add(call({ sessionKey: "web:b", arguments: { index } }));
    }
    for (const file of ["web%3Aa.jsonl", "web%3Ab.jsonl"]) expect(await lineCount(file)).toBeLessThanOrEqual(4);
    expect((await history.list("web:b")).map((entry) => entry.arguments)).toEqual([{ index: 8 }, { index: 7 }]);
    await history.close();
  });

  it("serializes concurrent adds to one session", async () => {
    const history = createFileToolHistory({ directory, maxEntries: 1_000 });
    await Promise.all(Array.from({ length: 50 }, (_, index) => history.add(call({ arguments: { index } }))));
    const indexes = (await history.list("telegram:-100")).map((entry) => (entry.arguments as { index: number }).index);
    expect(indexes.sort((left, right) => left - right)).toEqual(Array.from({ length: 50 }, (_, index) => index));
    await history.close();
  });

  it("skips a torn or corrupt line and keeps appending whole lines", async () => {
    await writeFile(path.join(directory, "telegram%3A-100.jsonl"), 'not json\n{"at":1,"tool":"exec"');
    const history = createFileToolHistory({ directory });
    await history.add(call());
    expect((await history.list("telegram:-100")).map((entry) => entry.tool)).toEqual(["read_file"]);
    await history.close();
  });
});
