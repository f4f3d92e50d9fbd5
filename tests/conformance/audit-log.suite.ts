/**
 * The AuditLog conformance suite: the rotated file and the Redis stream run it unchanged. Each
 * `open` is another log over the same storage, as another process builds it.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { AuditEntry, AuditLineOptions, AuditLog } from "../../src/tools/audit-log.js";

export interface AuditLogHarness {
  open(options: AuditLineOptions): Promise<AuditLog>;
  /** Everything stored, as text, to look for leaks. */
  raw(): Promise<string>;
  /** Several processes may write at once (the file log is one process's). */
  manyWriters: boolean;
  cleanup(): Promise<void>;
}

const NOON = Date.UTC(2025, 5, 1, 12, 0);
const CONFIG_SECRET = "config-secret-value-7f3a9c";

function entry(overrides: Partial<AuditEntry> = {}): AuditEntry {
  return {
    sessionKey: "telegram:42",
    channel: "telegram",
    chatId: "42",
    tool: "read_file",
    arguments: { path: "notes.md" },
    success: true,
    result: "hello",
    durationMs: 12,
    attempts: 1,
    ...overrides,
  };
}

/**
 * `manyWriters`: the implementation promises whole lines with several writing processes (the Redis
 * stream does; the rotated file is one process's by design, so that case is not registered for it).
 */
export function runAuditLogSuite(name: string, makeHarness: () => Promise<AuditLogHarness>, options: { manyWriters: boolean }): void {
  describe(`AuditLog conformance: ${name}`, () => {
    const harnesses: AuditLogHarness[] = [];
    const start = async () => {
      const harness = await makeHarness();
      harnesses.push(harness);
      return harness;
    };
    afterEach(async () => {
      for (const harness of harnesses.splice(0)) await harness.cleanup();
    });

    it("keeps one JSON line per call, and tails the newest, oldest first", async () => {
      const harness = await start();
      const log = await harness.open({ secrets: [], now: () => NOON });
      await log.record(entry());
      await log.record(entry({ tool: "exec", arguments: { command: "false" }, success: false, result: "Error: exit 1.", attempts: 3 }));
      await log.record(entry({ tool: "list_dir", arguments: {} }));
      const lines = (await log.tail(10)).map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.map((line) => line.tool)).toEqual(["read_file", "exec", "list_dir"]);
      expect(lines[1]).toEqual({
        time: "2025-06-01T12:00:00.000Z",
        sessionKey: "telegram:42",
        channel: "telegram",
        chatId: "42",
        tool: "exec",
        arguments: { command: "false" },
        outcome: "failure",
        resultPreview: "Error: exit 1.",
        resultChars: 14,
        durationMs: 12,
        attempts: 3,
      });
      expect((await log.tail(2)).map((line) => (JSON.parse(line) as { tool: string }).tool)).toEqual(["exec", "list_dir"]);
      expect(await log.tail(0)).toEqual([]);
      await log.close();
      // Another process (`countbot audit tail`) reads the same lines.
      const reader = await harness.open({ secrets: [] });
      expect(await reader.tail(10)).toHaveLength(3);
      await reader.close();
    });

    it("keeps secrets out: known values, secret-named arguments and credential-shaped text", async () => {
      const harness = await start();
      const log = await harness.open({ secrets: [CONFIG_SECRET] });
      await log.record(
        entry({
          arguments: { url: "https://x.test", apiKey: "argument-key-abcdef", note: `uses ${CONFIG_SECRET}` },
          result: "Authorization: Bearer header-token-xyz12345",
        }),
      );
      await log.close();
      const text = await harness.raw();
      expect(text).toContain("https://x.test");
      for (const leak of [CONFIG_SECRET, "argument-key-abcdef", "header-token-xyz12345"]) expect(text).not.toContain(leak);
    });

    it("never rejects: a record after close goes to onError", async () => {
      const harness = await start();
      const errors: Error[] = [];
      const log = await harness.open({ secrets: [], onError: (error) => errors.push(error) });
      await log.close();
      await expect(log.record(entry())).resolves.toBeUndefined();
      expect(errors.map((error) => error.message).join("\n")).toMatch(/closed/);
    });

    if (options.manyWriters) it("keeps every line whole when several processes write at once", async () => {
      const harness = await start();
      const writers = await Promise.all(Array.from({ length: 4 }, () => harness.open({ secrets: [] })));
      await Promise.all(Array.from({ length: 200 }, (_, index) => writers[index % 4]!.record(entry({ arguments: { index, padding: "x".repeat(900) } }))));
      await Promise.all(writers.map((writer) => writer.close()));
      const reader = await harness.open({ secrets: [] });
      const indexes = (await reader.tail(1_000)).map((line) => (JSON.parse(line) as { arguments: { index: number } }).arguments.index);
      expect(indexes.sort((left, right) => left - right)).toEqual(Array.from({ length: 200 }, (_, index) => index));
      await reader.close();
    });
  });
}
