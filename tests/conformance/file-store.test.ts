import { appendFile, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createInfrastructure } from "../../src/app/infrastructure.js";
import { loadConfig } from "../../src/config/load.js";
import { BusError } from "../../src/errors.js";
import { safeFileName } from "../../src/store/file-io.js";
import { createFileStore, readArchivedHistory } from "../../src/store/file-store.js";
import type { Fence, HistoryEntry, Store } from "../../src/store/store.js";
import { runSessionStoreSuite } from "./store.suite.js";

runSessionStoreSuite("file store", async ({ now }) => {
  const root = await mkdtemp(path.join(os.tmpdir(), "countbot-file-store-"));
  const dataDir = path.join(root, "data");
  // The bus's lease table as the store sees it: session key → the token holding the lease.
  const leases = new Map<string, number>();
  const holdsLease = async (key: string, fence: Fence) => leases.get(key) === fence.token;
  return {
    store: createFileStore({ dataDir, now, holdsLease }),
    cleanup: () => rm(root, { recursive: true, force: true }),
    archived: (key) => readArchivedHistory(dataDir, key),
    reopen: async () => createFileStore({ dataDir, now, holdsLease }),
    grantLease: async (key, token) => void leases.set(key, token),
  };
});

function entry(content: string, role: HistoryEntry["role"] = "user"): HistoryEntry {
  return { role, content, at: 1 };
}

/** Every file under a directory, as paths relative to it. */
async function filesUnder(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true, withFileTypes: true });
  return entries.filter((item) => item.isFile()).map((item) => path.relative(directory, path.join(item.parentPath, item.name)));
}

describe("file store", () => {
  let root: string;
  let dataDir: string;
  let store: Store;
  let clock: number;
  let skipped: { line: number; reason: string }[];

  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), "countbot-file-store-"));
    dataDir = path.join(root, "data");
    clock = 1_000;
    skipped = [];
    store = createFileStore({ dataDir, now: () => (clock += 10), onSkippedLine: (details) => skipped.push(details) });
  });

  afterEach(async () => {
    await store.close();
    await rm(root, { recursive: true, force: true });
  });

  const sessionFile = (key: string) => path.join(dataDir, "sessions", `${safeFileName(key)}.jsonl`);

  it("encodes keys into distinct, path-free, case-insensitively distinct names", () => {
    const keys = ["a:b", "a_b", "a%3Ab", "A:b", "a:B", "../../x", "..", ".", "a/b", "a\\b", "x~y"];
    const names = keys.map(safeFileName);
    expect(new Set(names.map((name) => name.toLowerCase())).size).toBe(keys.length);
    for (const name of names) {
      expect(name).toMatch(/^[a-z0-9_%A-F~-]+$/);
      expect(name).not.toMatch(/^\.+$/);
    }
    expect(safeFileName("telegram:-100123")).toBe("telegram%3A-100123");
    // Each byte of a UTF-8 character on its own, two hex digits, upper case; runs of them one after another.
    expect(safeFileName("Ab:\n\u00e9x\u{1F600}./")).toBe("%41b%3A%0A%C3%A9x%F0%9F%98%80%2E%2F");
    expect(decodeURIComponent(safeFileName("feishu:oc_9 é"))).toBe("feishu:oc_9 é");
    expect(safeFileName("z".repeat(1000)).length).toBeLessThan(120);
    expect(() => safeFileName("")).toThrow(/empty/);
  });

  it("keeps path-traversal keys inside the sessions directory", async () => {
    const keys = ["../../x", "../../../../../../tmp/escape", "/etc/passwd", "..\\..\\x", "%2e%2e/%2e%2e/x", "..", "."];
    for (const key of keys) {
      await store.sessions.append(key, [entry(key)]);
      await store.sessions.compact(key, []);
      await store.sessions.append(key, [entry(key)]);
      await store.sessions.reset(key);
    }
    expect(await readdir(root)).toEqual(["data"]);
    expect(await readdir(dataDir)).toEqual(["sessions"]);
    const files = await filesUnder(path.join(dataDir, "sessions"));
    expect(files).toHaveLength(keys.length * 3); // one session file and two archives per key
    for (const file of files) expect(file).toMatch(/^(archive\/)?[^/\\]+\.jsonl$/);
  });

  it("writes a meta line and then one line per entry, appending without a rewrite", async () => {
    await store.sessions.append("cli:direct", [entry("one"), entry("two", "assistant")]);
    const before = await stat(sessionFile("cli:direct"));
    await store.sessions.append("cli:direct", [entry("three")]);
    const after = await stat(sessionFile("cli:direct"));
    expect(after.ino).toBe(before.ino);

    const lines = (await readFile(sessionFile("cli:direct"), "utf8")).trimEnd().split("\n").map((line) => JSON.parse(line));
    expect(lines[0]).toMatchObject({ kind: "meta", key: "cli:direct", generation: 0 });
    expect(lines.slice(1).map((line) => [line.kind, line.entry.content])).toEqual([
      ["entry", "one"],
      ["entry", "two"],
      ["entry", "three"],
    ]);
  });

  it("skips a torn last line, and the next append does not merge into it", async () => {
    await store.sessions.append("telegram:1", [entry("one"), entry("two")]);
    await appendFile(sessionFile("telegram:1"), '{"kind":"entry","savedAt":5,"entry":{"role":"us');

    expect((await store.sessions.load("telegram:1")).history).toEqual([entry("one"), entry("two")]);
    expect(skipped).toEqual([expect.objectContaining({ line: 4, reason: "torn last line" })]);

    await store.sessions.append("telegram:1", [entry("three")]);
    expect((await store.sessions.load("telegram:1")).history).toEqual([entry("one"), entry("two"), entry("three")]);
    expect((await store.sessions.list()).map((meta) => meta.key)).toEqual(["telegram:1"]);
  });

  it("skips a corrupt line in the middle and still loads the rest", async () => {
    await store.sessions.append("telegram:2", [entry("one")]);
    await appendFile(sessionFile("telegram:2"), "not json\n");
    await store.sessions.append("telegram:2", [entry("two")]);
    expect((await store.sessions.load("telegram:2")).history).toEqual([entry("one"), entry("two")]);
    expect(skipped).toEqual([expect.objectContaining({ line: 3, reason: "not a valid record" })]);
  });

  it("rewrites atomically on compact and reset, archiving under sessions/archive", async () => {
    await store.sessions.append("web:x", [entry("one"), entry("two"), entry("three")]);
    const before = await stat(sessionFile("web:x"));
    await store.sessions.compact("web:x", [entry("three")]);
    expect((await stat(sessionFile("web:x"))).ino).not.toBe(before.ino);
    await store.sessions.reset("web:x");

    const files = (await filesUnder(path.join(dataDir, "sessions"))).sort();
    expect(files).toEqual([
      `archive/${safeFileName("web:x")}.0.1020.jsonl`,
      `archive/${safeFileName("web:x")}.0.1030.jsonl`,
      `${safeFileName("web:x")}.jsonl`,
    ]);
    const header = JSON.parse((await readFile(path.join(dataDir, "sessions", files[0]!), "utf8")).split("\n")[0]!);
    expect(header).toMatchObject({ kind: "archive", key: "web:x", reason: "compact", generation: 0 });
    expect(await readArchivedHistory(dataDir, "web:x")).toEqual([entry("one"), entry("two"), entry("three")]);
  });

  it("never overwrites an archive written at the same instant", async () => {
    const frozen = createFileStore({ dataDir, now: () => 5 });
    await frozen.sessions.append("cli:frozen", [entry("one")]);
    await frozen.sessions.compact("cli:frozen", []);
    await frozen.sessions.append("cli:frozen", [entry("two")]);
    await frozen.sessions.compact("cli:frozen", []);
    await frozen.close();
    expect(await readArchivedHistory(dataDir, "cli:frozen")).toEqual([entry("one"), entry("two")]);
  });

  it("serializes an append queued behind a compact and a reset", async () => {
    await store.sessions.append("cli:mixed", [entry("old")]);
    await Promise.all([
      store.sessions.compact("cli:mixed", []),
      store.sessions.append("cli:mixed", [entry("after compact")]),
      store.sessions.reset("cli:mixed"),
      store.sessions.append("cli:mixed", [entry("new generation")]),
    ]);
    const snapshot = await store.sessions.load("cli:mixed");
    expect(snapshot.meta.generation).toBe(1);
    expect(snapshot.history).toEqual([entry("new generation")]);
    expect(await readArchivedHistory(dataDir, "cli:mixed")).toEqual([entry("old"), entry("after compact")]);
  });

  it("reads updatedAt from the tail of a long session without a rewrite", async () => {
    const long = "x".repeat(100 * 1024);
    await store.sessions.append("cli:long", [entry(long), entry(long)]);
    await store.sessions.append("cli:long", [entry(long)]);
    const [meta] = await store.sessions.list();
    expect(meta).toEqual((await store.sessions.load("cli:long")).meta);
    expect(meta!.updatedAt).toBeGreaterThan(meta!.createdAt);
  });

  it("lists a session whose meta line was lost, by decoding its file name", async () => {
    await mkdir(path.dirname(sessionFile("telegram:-5")), { recursive: true });
    await writeFile(sessionFile("telegram:-5"), `${JSON.stringify({ kind: "entry", savedAt: 77, entry: entry("kept") })}\n`);
    expect(await store.sessions.list()).toEqual([{ key: "telegram:-5", createdAt: 77, updatedAt: 77, generation: 0 }]);
    expect((await store.sessions.load("telegram:-5")).history).toEqual([entry("kept")]);
  });

  it("rejects an entry it could not load back, leaving the file alone", async () => {
    await store.sessions.append("cli:bad", [entry("good")]);
    const invalid = { role: "system", content: "nope", at: 1 } as unknown as HistoryEntry;
    await expect(store.sessions.append("cli:bad", [invalid])).rejects.toThrow(/invalid history entries/);
    expect((await store.sessions.load("cli:bad")).history).toEqual([entry("good")]);
  });

  it("refuses a fenced write it cannot check (no holdsLease) instead of writing unchecked", async () => {
    await store.sessions.append("cli:unchecked", [entry("one")]);
    await expect(store.sessions.append("cli:unchecked", [entry("two")], { token: 1 })).rejects.toThrow(/holdsLease/);
    await expect(store.sessions.compact("cli:unchecked", [], { token: 1 })).rejects.toThrow(/holdsLease/);
    await expect(store.sessions.reset("cli:unchecked", { token: 1 })).rejects.toThrow(/holdsLease/);
    expect(await store.sessions.load("cli:unchecked")).toMatchObject({ history: [entry("one")], meta: { generation: 0 } });
  });

  it("refuses work after close", async () => {
    await store.close();
    await expect(store.sessions.append("cli:x", [entry("late")])).rejects.toThrow(/closed/);
  });
});

describe("file store in the embedded infrastructure", () => {
  it("asks the memory bus: a worker whose lease expired and was claimed again cannot write", async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), "countbot-file-store-"));
    let clock = 1_000_000;
    await writeFile(path.join(root, "countbot.json"), "{}");
    const config = loadConfig({ env: { COUNTBOT_DATA_DIR: path.join(root, "data") }, cwd: root, file: path.join(root, "countbot.json") });
    const infrastructure = await createInfrastructure(config, pino({ level: "silent" }), { embedded: true, now: () => clock });
    try {
      const { bus, store: embedded } = infrastructure;
      const message = { id: "m1", channel: "test", chatId: "a", senderId: "u", content: "hi", media: [], mentions: [], receivedAt: clock, metadata: {} };
      await bus.publishInbound(message);
      const first = await bus.claimSession({ timeoutMs: 0 });
      await embedded.sessions.append("test:a", [entry("from the first worker")], { token: first!.token });
      clock += infrastructure.leaseTtlMs; // the first worker stalled past its lease
      const second = await bus.claimSession({ timeoutMs: 0 });
      expect(second!.token).toBeGreaterThan(first!.token);

      const refused = await embedded.sessions.append("test:a", [entry("zombie")], { token: first!.token }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(BusError);
      await embedded.sessions.append("test:a", [entry("from the second worker")], { token: second!.token });
      expect((await embedded.sessions.load("test:a")).history).toEqual([entry("from the first worker"), entry("from the second worker")]);
    } finally {
      await infrastructure.close();
      await rm(root, { recursive: true, force: true });
    }
  });
});
