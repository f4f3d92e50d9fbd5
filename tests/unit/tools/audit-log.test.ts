import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type AuditEntry, auditEntryOf, createFileAuditLog, createToolCallRedactor } from "../../../src/tools/audit-log.js";

const NOON = Date.UTC(2025, 5, 1, 12, 0);
const CONFIG_SECRET = "config-secret-value-7f3a9c";

let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(path.join(os.tmpdir(), "countbot-audit-"));
});

afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

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

async function readLines(file = "tool-calls.jsonl"): Promise<Record<string, unknown>[]> {
  const text = await readFile(path.join(directory, file), "utf8");
  expect(text.endsWith("\n")).toBe(true);
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe("audit log", () => {
  it("writes one JSON line per call with the session, tool, arguments, outcome and timing", async () => {
    const log = createFileAuditLog({ directory, maxFileBytes: 1_000_000, maxFiles: 3, secrets: [], now: () => NOON });
    await log.record(entry());
    await log.record(entry({ tool: "exec", arguments: { command: "false" }, success: false, result: "Error: exit 1.", attempts: 3 }));
    await log.close();

    expect(await readLines()).toEqual([
      {
        time: "2025-06-01T12:00:00.000Z",
        sessionKey: "telegram:42",
        channel: "telegram",
        chatId: "42",
        tool: "read_file",
        arguments: { path: "notes.md" },
        outcome: "success",
        resultPreview: "hello",
        resultChars: 5,
        durationMs: 12,
        attempts: 1,
      },
      expect.objectContaining({ tool: "exec", arguments: { command: "false" }, outcome: "failure", attempts: 3 }),
    ]);
  });

  it("keeps secrets in arguments, results and header strings out of the file", async () => {
    const log = createFileAuditLog({ directory, maxFileBytes: 1_000_000, maxFiles: 3, secrets: [CONFIG_SECRET] });
    const leaks = [
      CONFIG_SECRET,
      "argument-api-key-0a1b2c3d",
      "nested-password-4e5f6g",
      "bearer-token-abcdefghijkl",
      "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX",
      "result-token-zyxwvu98",
      "query-key-5551234",
      "dbpassword77",
    ];
    await log.record(
      entry({
        tool: "web_fetch",
        arguments: {
          url: `https://example.com/?q=${CONFIG_SECRET}`,
          api_key: "argument-api-key-0a1b2c3d",
          options: { password: "nested-password-4e5f6g", retries: 2 },
          headers: { Authorization: "Bearer bearer-token-abcdefghijkl" },
        },
        result:
          "curl -H 'Authorization: Bearer bearer-token-abcdefghijkl' https://api.example.com?api_key=query-key-5551234\n" +
          `OPENAI_API_KEY=sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX\n{"token": "result-token-zyxwvu98"}\n` +
          `redis://app:dbpassword77@cache:6379 and ${CONFIG_SECRET}`,
      }),
    );
    // The raw text of unparseable arguments is scrubbed too.
    await log.record(entry({ arguments: `{"command": "curl -H \\"Authorization: Bearer bearer-token-abcdefghijkl\\"`, success: false }));
    await log.close();

    const text = await readFile(path.join(directory, "tool-calls.jsonl"), "utf8");
    for (const leak of leaks) expect(text, leak).not.toContain(leak);
    const [first] = await readLines();
    expect(first?.arguments).toMatchObject({ url: "https://example.com/?q=****3a9c", options: { retries: 2 } });
    expect(first?.resultPreview).toContain("Authorization: Bearer ****");
    expect(first?.resultPreview).toContain("api_key=****");
  });

  it("redacts a secret that straddles the end of the result preview", async () => {
    const log = createFileAuditLog({ directory, maxFileBytes: 1_000_000, maxFiles: 3, secrets: [CONFIG_SECRET] });
    await log.record(entry({ result: `${"x".repeat(490)}${CONFIG_SECRET}${"y".repeat(100)}` }));
    await log.close();
    const text = await readFile(path.join(directory, "tool-calls.jsonl"), "utf8");
    expect(text).not.toContain(CONFIG_SECRET.slice(0, 10));
    const [line] = await readLines();
    expect((line?.resultPreview as string).startsWith("x".repeat(490))).toBe(true);
    expect(line?.resultChars).toBe(490 + CONFIG_SECRET.length + 100);
  });

  it("cuts long string arguments", async () => {
    const log = createFileAuditLog({ directory, maxFileBytes: 1_000_000, maxFiles: 3, secrets: [] });
    await log.record(entry({ tool: "write_file", arguments: { path: "big.txt", content: "z".repeat(50_000) } }));
    await log.close();
    const [line] = await readLines();
    const content = (line?.arguments as { content: string }).content;
    expect(content.length).toBeLessThan(1_100);
    expect(content).toContain("49000 more characters");
  });

  it("rotates by size and keeps only maxFiles rotated files, newest in .1", async () => {
    const log = createFileAuditLog({ directory, maxFileBytes: 700, maxFiles: 2, secrets: [] });
    for (let index = 0; index < 30; index++) await log.record(entry({ arguments: { index } }));
    await log.close();

    expect((await readdir(directory)).sort()).toEqual(["tool-calls.1.jsonl", "tool-calls.2.jsonl", "tool-calls.jsonl"]);
    const indexes = async (file: string) => (await readLines(file)).map((line) => (line.arguments as { index: number }).index);
    const [current, first, second] = await Promise.all([indexes("tool-calls.jsonl"), indexes("tool-calls.1.jsonl"), indexes("tool-calls.2.jsonl")]);
    for (const file of ["tool-calls.jsonl", "tool-calls.1.jsonl", "tool-calls.2.jsonl"]) {
      expect((await readFile(path.join(directory, file))).length).toBeLessThanOrEqual(700);
    }
    // Contiguous and newest last: .2, then .1, then the current file; the oldest calls are gone.
    const all = [...second, ...first, ...current];
    expect(all.at(-1)).toBe(29);
    expect(all).toEqual(Array.from({ length: all.length }, (_, offset) => 30 - all.length + offset));
    expect(all.length).toBeLessThan(30);
  });

  it("deletes rotated files beyond maxFiles left by an earlier, larger setting", async () => {
    await writeFile(path.join(directory, "tool-calls.jsonl"), `${"{}".padEnd(600, " ")}\n`);
    await writeFile(path.join(directory, "tool-calls.5.jsonl"), "{}\n");
    const log = createFileAuditLog({ directory, maxFileBytes: 700, maxFiles: 1, secrets: [] });
    await log.record(entry());
    await log.close();
    expect((await readdir(directory)).sort()).toEqual(["tool-calls.1.jsonl", "tool-calls.jsonl"]);
  });

  it("writes concurrent records as whole lines, none lost, also across rotations", async () => {
    const log = createFileAuditLog({ directory, maxFileBytes: 200_000, maxFiles: 50, secrets: [] });
    const payload = "p".repeat(900);
    await Promise.all(Array.from({ length: 200 }, (_, index) => log.record(entry({ arguments: { index, payload } }))));
    await log.close();

    const files = await readdir(directory);
    expect(files.length).toBeGreaterThan(1);
    const indexes: number[] = [];
    for (const file of files) {
      for (const line of await readLines(file)) indexes.push((line.arguments as { index: number }).index);
    }
    expect(indexes.sort((left, right) => left - right)).toEqual(Array.from({ length: 200 }, (_, index) => index));
  });

  it("starts a new line after a line torn by a crash", async () => {
    await writeFile(path.join(directory, "tool-calls.jsonl"), '{"time":"torn');
    const log = createFileAuditLog({ directory, maxFileBytes: 1_000_000, maxFiles: 3, secrets: [] });
    await log.record(entry());
    await log.close();
    const lines = (await readFile(path.join(directory, "tool-calls.jsonl"), "utf8")).split("\n");
    expect(lines[0]).toBe('{"time":"torn');
    expect(JSON.parse(lines[1]!)).toMatchObject({ tool: "read_file" });
  });

  it("reports a write failure to onError and never rejects", async () => {
    const blocker = path.join(directory, "not-a-directory");
    await writeFile(blocker, "");
    const errors: Error[] = [];
    const log = createFileAuditLog({ directory: blocker, maxFileBytes: 1_000, maxFiles: 1, secrets: [], onError: (error) => errors.push(error) });

    await expect(log.record(entry())).resolves.toBeUndefined();
    expect(errors).toHaveLength(1);
    expect(errors[0]?.message).toMatch(/^cannot write the audit log .*tool-calls\.jsonl: /);
    expect(errors[0]?.cause).toBeInstanceOf(Error);

    const throwing = createFileAuditLog({
      directory: blocker,
      maxFileBytes: 1_000,
      maxFiles: 1,
      secrets: [],
      onError: () => {
        throw new Error("handler broke");
      },
    });
    await expect(throwing.record(entry())).resolves.toBeUndefined();
  });

  it("reports records after close instead of writing them", async () => {
    const errors: Error[] = [];
    const log = createFileAuditLog({ directory, maxFileBytes: 1_000, maxFiles: 1, secrets: [], onError: (error) => errors.push(error) });
    await log.close();
    await log.record(entry());
    expect(errors.map((error) => error.message)).toEqual([expect.stringContaining("closed")]);
    expect(await readdir(directory)).toEqual([]);
  });

  it("builds an entry from a turn's tool call record", () => {
    const record = { id: "call-1", name: "exec", arguments: { command: "ls" }, result: "a\nb", success: true, durationMs: 5, attempts: 2, startedAt: NOON };
    expect(auditEntryOf(record, { sessionKey: "cli:direct", channel: "cli", chatId: "direct" })).toEqual({
      sessionKey: "cli:direct",
      channel: "cli",
      chatId: "direct",
      tool: "exec",
      arguments: { command: "ls" },
      success: true,
      result: "a\nb",
      durationMs: 5,
      attempts: 2,
    });
  });
});

describe("tool call redactor", () => {
  const redactor = createToolCallRedactor([CONFIG_SECRET]);

  it("masks secret-named fields whole, at any depth and in any naming style", () => {
    expect(
      redactor.value({
        apiKey: "k-1234567890abcdef",
        access_token: "short",
        "x-client-secret": "abc",
        headers: { "X-Api-Key": "header-key-value-1", Accept: "text/html" },
        list: [{ password: 1234 }],
        max_tokens: 100,
        path: "token.txt",
      }),
    ).toEqual({
      apiKey: "****cdef",
      access_token: "****",
      "x-client-secret": "****",
      headers: { "X-Api-Key": "****ue-1", Accept: "text/html" },
      list: [{ password: "****" }],
      max_tokens: 100,
      path: "token.txt",
    });
  });

  it("leaves ordinary text alone", () => {
    const text = "Listed 3 files: a.ts, b.ts, key.md. The bearer of good news.";
    expect(redactor.text(text)).toBe(text);
  });
});
