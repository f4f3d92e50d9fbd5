/**
 * The ToolHistory conformance suite: JSONL files and Redis run it unchanged. Each `open` is another
 * history over the same storage, as another worker, a gateway or a restarted process builds it.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ToolHistory, ToolHistoryEntryOptions, ToolHistoryInput } from "../../src/tools/tool-history.js";

export interface ToolHistoryHarness {
  open(options?: ToolHistoryEntryOptions): Promise<ToolHistory>;
  /** Everything stored, as text, to look for leaks. */
  raw(): Promise<string>;
  cleanup(): Promise<void>;
}

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

export function runToolHistorySuite(name: string, makeHarness: () => Promise<ToolHistoryHarness>): void {
  describe(`ToolHistory conformance: ${name}`, () => {
    const harnesses: ToolHistoryHarness[] = [];
    const opened: ToolHistory[] = [];
    const start = async () => {
      const harness = await makeHarness();
      harnesses.push(harness);
      return {
        harness,
        open: async (options?: ToolHistoryEntryOptions) => {
          const history = await harness.open(options);
          opened.push(history);
          return history;
        },
      };
    };

    afterEach(async () => {
      for (const history of opened.splice(0)) await history.close();
      for (const harness of harnesses.splice(0)) await harness.cleanup();
    });

    it("lists a session's calls newest first, filtered by tool and limited", async () => {
      const { open } = await start();
      const history = await open({ now: ticking() });
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
    });

    it("keeps sessions apart, whatever their keys", async () => {
      const { open } = await start();
      const history = await open();
      await history.add(call({ sessionKey: "telegram:-100" }));
      await history.add(call({ sessionKey: "discord:../../etc", tool: "exec" }));
      await history.add(call({ sessionKey: "telegram:-100:x", tool: "list_dir" }));
      expect((await history.list("discord:../../etc")).map((entry) => entry.tool)).toEqual(["exec"]);
      expect((await history.list("telegram:-100")).map((entry) => entry.tool)).toEqual(["read_file"]);
      expect(await history.list("cli:direct")).toEqual([]);
    });

    it("shows one process what another wrote: a gateway reads the workers' calls", async () => {
      const { open } = await start();
      const workerA = await open();
      const workerB = await open();
      await workerA.add(call({ tool: "memory" }));
      await workerB.add(call({ tool: "exec" }));
      const gateway = await open();
      expect((await gateway.list("telegram:-100")).map((entry) => entry.tool).sort()).toEqual(["exec", "memory"]);
    });

    it("loses no call when two workers add to one session at once", async () => {
      const { open } = await start();
      const workers = [await open({ maxEntries: 1_000 }), await open({ maxEntries: 1_000 })];
      await Promise.all(Array.from({ length: 40 }, (_, index) => workers[index % 2]!.add(call({ arguments: { index } }))));
      const indexes = (await workers[0]!.list("telegram:-100")).map((entry) => (entry.arguments as { index: number }).index);
      expect(indexes.sort((left, right) => left - right)).toEqual(Array.from({ length: 40 }, (_, index) => index));
    });

    it("caps results, user messages and string arguments", async () => {
      const { open } = await start();
      const history = await open({ maxTextChars: 100 });
      await history.add(call({ result: "r".repeat(5_000), userMessage: "u".repeat(300), arguments: { content: "c".repeat(20_000) } }));
      const [entry] = await history.list("telegram:-100");
      expect(entry?.result).toBe(`${"r".repeat(100)}…[4900 more characters]`);
      expect(entry?.userMessage).toBe(`${"u".repeat(100)}…[200 more characters]`);
      expect((entry?.arguments as { content: string }).content.length).toBeLessThan(1_100);
    });

    it("redacts secrets from what it stores", async () => {
      const { harness, open } = await start();
      const history = await open({ secrets: ["known-secret-123456"] });
      await history.add(
        call({
          arguments: { url: "https://x.test", apiKey: "argument-key-abcdef" },
          userMessage: "use known-secret-123456",
          result: "Authorization: Bearer header-token-xyz12345",
        }),
      );
      const text = await harness.raw();
      expect(text).toContain("https://x.test");
      for (const leak of ["known-secret-123456", "argument-key-abcdef", "header-token-xyz12345"]) expect(text).not.toContain(leak);
    });

    it("keeps a session's last maxEntries calls, also across restarts", async () => {
      const { open } = await start();
      const first = await open({ maxEntries: 3 });
      for (let index = 0; index < 10; index++) await first.add(call({ arguments: { index } }));
      expect((await first.list("telegram:-100")).map((entry) => entry.arguments)).toEqual([{ index: 9 }, { index: 8 }, { index: 7 }]);
      await first.close();
      const second = await open({ maxEntries: 3 });
      for (let index = 10; index < 20; index++) await second.add(call({ arguments: { index } }));
      expect((await second.list("telegram:-100")).map((entry) => entry.arguments)).toEqual([{ index: 19 }, { index: 18 }, { index: 17 }]);
    });

    it("clears a session", async () => {
      const { open } = await start();
      const history = await open();
      await history.add(call());
      await history.add(call({ sessionKey: "discord:1" }));
      await history.clear("telegram:-100");
      expect(await history.list("telegram:-100")).toEqual([]);
      expect(await history.list("discord:1")).toHaveLength(1);
      await history.add(call());
      expect(await history.list("telegram:-100")).toHaveLength(1);
    });

    it("refuses work after close", async () => {
      const { open } = await start();
      const history = await open();
      await history.close();
      await expect(history.add(call())).rejects.toThrow(/closed/);
      await expect(history.list("telegram:-100")).rejects.toThrow(/closed/);
    });
  });
}
