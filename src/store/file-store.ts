/**
 * The file store: one JSONL file per session under `<dataDir>/sessions/`.
 *
 * Layout of `<dataDir>/sessions/<safeFileName(key)>.jsonl`:
 * - line 1: `{"kind":"meta","version":1,"key","createdAt","updatedAt","generation"}`
 * - then one `{"kind":"entry","savedAt","entry":HistoryEntry}` per history entry.
 *
 * `append` only appends lines, so its cost grows with the new entries, not the history. Because the
 * meta line is not rewritten on append, `updatedAt` is the later of the meta's and the last entry's
 * `savedAt`. `compact` and `reset` rewrite the file atomically (temp file + rename) after copying
 * what they drop to `<dataDir>/sessions/archive/`.
 *
 * One process owns a data dir: operations on one key are serialized in memory, not with file locks.
 * Fenced writes ask the bus (`holdsLease`) inside that per-key queue, just before writing.
 * DM pairing lives in `<dataDir>/pairing.json` (./file-pairing.ts), which the CLI writes too.
 * Subagent tasks live in `<dataDir>/tasks/`, one JSON file each (./file-tasks.ts); agent teams in
 * `<dataDir>/teams.json` (./file-teams.ts) and their runs in `<dataDir>/workflow-runs/`
 * (./file-workflow-runs.ts).
 */
import type { FileHandle } from "node:fs/promises";
import { mkdir, open, readFile, readdir, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { BusError } from "../errors.js";
import { createKeyedQueue, decodeFileName, safeFileName, writeFileAtomic } from "./file-io.js";
import { createFilePairingStore } from "./file-pairing.js";
import { createFileTaskStore } from "./file-tasks.js";
import { createFileTeamStore } from "./file-teams.js";
import { createFileRunStore } from "./file-workflow-runs.js";
import { type Fence, type HistoryEntry, HistoryEntriesSchema, HistoryEntrySchema, type LeaseCheck, type SessionMeta, type SessionSnapshot, type SessionStore, type Store } from "./store.js";

export interface FileStoreOptions {
  /** Root of durable state; sessions live under `<dataDir>/sessions`. */
  dataDir: string;
  /** Clock in ms since epoch; injected so tests are deterministic. */
  now?: () => number;
  /** Told about each line skipped on load: a line torn by a crash mid-append, or a corrupt one. */
  onSkippedLine?: (details: { key: string; file: string; line: number; reason: string }) => void;
  /**
   * The bus's answer to "does this fence still hold the session's lease?", asked before every
   * fenced write. The file store cannot see the bus's leases itself, so without it a fenced write
   * throws rather than pass unchecked.
   */
  holdsLease?: LeaseCheck;
}

const FORMAT_VERSION = 1;
const SESSION_SUFFIX = ".jsonl";

const MetaRecordSchema = z.object({
  kind: z.literal("meta"),
  ...{ version: z.number(), key: z.string(), createdAt: z.number(), updatedAt: z.number() },
  generation: z.number().int().nonnegative(),
});
const EntryRecordSchema = z.object({ kind: z.literal("entry"), savedAt: z.number(), entry: HistoryEntrySchema });
const ArchiveHeaderSchema = z.object({
  kind: z.literal("archive"),
  ...{ version: z.number(), key: z.string(), generation: z.number(), archivedAt: z.number() },
  reason: z.enum(["compact", "reset"]),
});
const RecordSchema = z.discriminatedUnion("kind", [MetaRecordSchema, EntryRecordSchema, ArchiveHeaderSchema]);
type SessionRecord = z.infer<typeof RecordSchema>;

function parseRecord(line: string): SessionRecord | undefined {
  try {
    const parsed = RecordSchema.safeParse(JSON.parse(line));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Checked on the way in: an entry the loader would reject must fail now, not vanish on the next
 * load. What is stored is the parsed copy, so it has the very shape (and key order) a load returns.
 */
function validEntries(entries: HistoryEntry[]): HistoryEntry[] {
  const parsed = HistoryEntriesSchema.safeParse(entries);
  if (!parsed.success) throw new Error(`invalid history entries: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

function metaLine(meta: SessionMeta): string {
  return `${JSON.stringify({ kind: "meta", version: FORMAT_VERSION, ...meta })}\n`;
}

function entryLines(entries: HistoryEntry[], savedAt: number): string {
  return entries.map((entry) => `${JSON.stringify({ kind: "entry", savedAt, entry })}\n`).join("");
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT";
}

/** Entries of `history` that are not in `keep` (compared by value, each kept entry used once). */
function droppedEntries(history: HistoryEntry[], keep: HistoryEntry[]): HistoryEntry[] {
  const remaining = keep.map((entry) => JSON.stringify(entry));
  return history.filter((entry) => {
    const index = remaining.indexOf(JSON.stringify(entry));
    if (index !== -1) remaining.splice(index, 1);
    return index === -1;
  });
}

/** A session file's lines: the meta line first, then entries; a line that is neither is reported and skipped. */
function parseSession(key: string, file: string, text: string, onSkippedLine: FileStoreOptions["onSkippedLine"], now: () => number): SessionSnapshot {
  let meta: SessionMeta | undefined;
  let lastSavedAt: number | undefined;
  const history: HistoryEntry[] = [];
  const lines = text.split("\n");
  lines.forEach((line, index) => {
    if (line.trim() === "") return;
    const record = parseRecord(line);
    if (record?.kind === "meta" && index === 0) {
      meta = { key, createdAt: record.createdAt, updatedAt: record.updatedAt, generation: record.generation };
    } else if (record?.kind === "entry") {
      history.push(record.entry);
      lastSavedAt = record.savedAt;
    } else {
      const torn = index === lines.length - 1;
      onSkippedLine?.({ key, file, line: index + 1, reason: torn ? "torn last line" : "not a valid record" });
    }
  });
  // A lost meta line costs the timestamps, not the history.
  meta ??= newMeta(key, lastSavedAt ?? now());
  meta.updatedAt = Math.max(meta.updatedAt, lastSavedAt ?? 0);
  return { meta, history };
}

/** Writes dropped entries to a new archive file (never over an existing one). */
async function archive(archiveDir: string, meta: SessionMeta, entries: HistoryEntry[], reason: "compact" | "reset", archivedAt: number): Promise<void> {
  if (entries.length === 0) return;
  await mkdir(archiveDir, { recursive: true });
  const header = { kind: "archive", version: FORMAT_VERSION, key: meta.key, generation: meta.generation, reason, archivedAt };
  const content = `${JSON.stringify(header)}\n${entryLines(entries, archivedAt)}`;
  const base = `${safeFileName(meta.key)}.${meta.generation}.${archivedAt}`;
  // Several compactions can share a timestamp (and a fake clock): never overwrite an archive.
  for (let attempt = 0; ; attempt++) {
    const file = path.join(archiveDir, `${base}${attempt === 0 ? "" : `-${attempt}`}${SESSION_SUFFIX}`);
    try {
      await writeFile(file, content, { encoding: "utf8", flag: "wx" });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
}

/** Appends whole lines, first ending a line a crash left without its newline. */
async function appendLines(file: string, text: string): Promise<void> {
  const handle = await open(file, "a+");
  try {
    const { size } = await handle.stat();
    const last = Buffer.alloc(1);
    if (size > 0) await handle.read(last, 0, 1, size - 1);
    // A crash mid-append leaves a line without its newline; end it so the new lines stay whole.
    await handle.write(size > 0 && last[0] !== 0x0a ? `\n${text}` : text);
  } finally {
    await handle.close();
  }
}

/**
 * Throws BusError("lease-lost") when `fence` no longer holds the session's lease. Called inside
 * the key's queue right before the write, so no other write to the session comes in between.
 */
async function checkFence(key: string, fence: Fence | undefined, holdsLease: FileStoreOptions["holdsLease"]): Promise<void> {
  if (fence === undefined) return;
  if (!Number.isSafeInteger(fence.token)) throw new BusError(`fencing token ${fence.token} is not an integer`, "invalid");
  if (!holdsLease) throw new Error("a fenced write needs the bus's lease check: create the file store with `holdsLease`");
  if (!(await holdsLease(key, fence))) throw new BusError(`lease on ${key} (token ${fence.token}) is no longer held`, "lease-lost");
}

/** The meta of a session that has no file yet. */
function newMeta(key: string, time: number): SessionMeta {
  return { key, createdAt: time, updatedAt: time, generation: 0 };
}

/** Every session's meta, sorted by key. */
async function listSessions(sessionsDir: string): Promise<SessionMeta[]> {
  const metas: SessionMeta[] = [];
  for (const name of (await readdirIfExists(sessionsDir)).filter((candidate) => candidate.endsWith(SESSION_SUFFIX))) {
    const meta = await readMeta(path.join(sessionsDir, name), name);
    if (meta) metas.push(meta);
  }
  return metas.sort((left, right) => (left.key < right.key ? -1 : left.key > right.key ? 1 : 0));
}

/** Whether the file is there; errors other than its absence are thrown. */
async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch (error) {
    if (!isMissing(error)) throw error;
    return false;
  }
}

export function createFileStore(options: FileStoreOptions): Store {
  const now = options.now ?? Date.now;
  const sessionsDir = path.join(options.dataDir, "sessions");
  const archiveDir = path.join(sessionsDir, "archive");
  const queue = createKeyedQueue();
  const pairing = createFilePairingStore({ file: path.join(options.dataDir, "pairing.json") });
  const tasks = createFileTaskStore({ directory: path.join(options.dataDir, "tasks") });
  const teams = createFileTeamStore({ file: path.join(options.dataDir, "teams.json") });
  const runs = createFileRunStore({ directory: path.join(options.dataDir, "workflow-runs") });
  let closed = false;

  const freshMeta = (key: string, time = now()) => newMeta(key, time);
  const fileOf = (key: string) => path.join(sessionsDir, `${safeFileName(key)}${SESSION_SUFFIX}`);

  async function readSession(key: string): Promise<SessionSnapshot | undefined> {
    const file = fileOf(key);
    const text = await readFile(file, "utf8").catch((error: unknown) => (isMissing(error) ? undefined : Promise.reject(error)));
    return text === undefined ? undefined : parseSession(key, file, text, options.onSkippedLine, now);
  }

  async function rewrite(meta: SessionMeta, history: HistoryEntry[]): Promise<void> {
    await mkdir(sessionsDir, { recursive: true });
    await writeFileAtomic(fileOf(meta.key), metaLine(meta) + entryLines(history, meta.updatedAt));
  }

  function serialized<T>(key: string, operation: () => Promise<T>): Promise<T> {
    if (closed) return Promise.reject(new Error("the file store is closed"));
    return queue.run(safeFileName(key), operation);
  }

  const sessions: SessionStore = {
    load(key) {
      return serialized(key, async () => {
        return (await readSession(key)) ?? { meta: freshMeta(key), history: [] };
      });
    },

    append(key, input, fence) {
      return serialized(key, async () => {
        const entries = validEntries(input);
        // Checked even with nothing to write, so the caller still learns that its lease is gone.
        await checkFence(key, fence, options.holdsLease);
        if (entries.length === 0) return;
        const time = now();
        // A new session appears whole (meta + entries) or not at all.
        if (await exists(fileOf(key))) await appendLines(fileOf(key), entryLines(entries, time));
        else await rewrite(freshMeta(key, time), entries);
      });
    },

    compact(key, input, fence) {
      return serialized(key, async () => {
        const keep = validEntries(input);
        await checkFence(key, fence, options.holdsLease);
        const time = now();
        const current = await readSession(key);
        const meta = current?.meta ?? freshMeta(key, time);
        // Archive first: a crash between the two leaves a duplicate, never a loss.
        await archive(archiveDir, meta, droppedEntries(current?.history ?? [], keep), "compact", time);
        await rewrite({ ...meta, updatedAt: time }, keep);
      });
    },

    reset(key, fence) {
      return serialized(key, async () => {
        await checkFence(key, fence, options.holdsLease);
        const time = now();
        const current = await readSession(key);
        const meta = current?.meta ?? freshMeta(key, time);
        await archive(archiveDir, meta, current?.history ?? [], "reset", time);
        await rewrite({ ...meta, updatedAt: time, generation: meta.generation + 1 }, []);
      });
    },

    list: () => listSessions(sessionsDir),
  };

  return {
    sessions,
    tasks,
    pairing,
    teams,
    runs,
    async close() {
      closed = true;
      await Promise.all([queue.drain(), pairing.close(), tasks.close(), teams.close(), runs.close()]);
    },
  };
}

/** The meta of one session file, reading only its first line and its tail. */
async function readMeta(file: string, name: string): Promise<SessionMeta | undefined> {
  const handle = await open(file, "r").catch((error: unknown) => {
    if (isMissing(error)) return undefined; // compacted or reset under our feet
    throw error;
  });
  if (!handle) return undefined;
  try {
    const { size } = await handle.stat();
    const head = Buffer.alloc(Math.min(size, 64 * 1024));
    await handle.read(head, 0, head.length, 0);
    const end = head.indexOf(0x0a);
    const record = end === -1 ? undefined : parseRecord(head.subarray(0, end).toString("utf8"));
    const lastSavedAt = await readLastSavedAt(handle, size);
    if (record?.kind === "meta") {
      const { key, createdAt, updatedAt, generation } = record;
      return { key, createdAt, generation, updatedAt: Math.max(updatedAt, lastSavedAt ?? 0) };
    }
    // No readable meta line: the name still gives the key, unless it was shortened with a hash.
    const key = decodeFileName(name.slice(0, -SESSION_SUFFIX.length));
    const time = lastSavedAt ?? 0;
    return key === undefined ? undefined : { key, createdAt: time, updatedAt: time, generation: 0 };
  } finally {
    await handle.close();
  }
}

/** The `savedAt` of the last whole entry line, read backwards in growing windows. */
async function readLastSavedAt(handle: FileHandle, size: number): Promise<number | undefined> {
  for (let window = Math.min(size, 64 * 1024); window > 0; window = Math.min(size, window * 4)) {
    const start = size - window;
    const buffer = Buffer.alloc(window);
    await handle.read(buffer, 0, window, start);
    const lines = buffer.toString("utf8").split("\n");
    // The first piece may start mid-line (and mid-character) unless the window reaches the start.
    if (start > 0) lines.shift();
    for (const line of lines.reverse()) {
      const record = parseRecord(line);
      if (record?.kind === "entry") return record.savedAt;
      if (record?.kind === "meta") return undefined;
    }
    if (start === 0) return undefined;
  }
  return undefined;
}

async function readdirIfExists(directory: string): Promise<string[]> {
  try {
    return await readdir(directory);
  } catch (error) {
    if (isMissing(error)) return [];
    throw error;
  }
}

/**
 * Everything archived for a key (by `compact` and `reset`), oldest archive first. For operators and
 * tests: the Store contract promises dropped entries stay readable but has no read method for them.
 */
export async function readArchivedHistory(dataDir: string, key: string): Promise<HistoryEntry[]> {
  const archiveDir = path.join(dataDir, "sessions", "archive");
  const prefix = `${safeFileName(key)}.`;
  const archives: { archivedAt: number; generation: number; sequence: number; entries: HistoryEntry[] }[] = [];
  for (const name of await readdirIfExists(archiveDir)) {
    if (!name.startsWith(prefix) || !name.endsWith(SESSION_SUFFIX)) continue;
    const [first = "", ...lines] = (await readFile(path.join(archiveDir, name), "utf8")).split("\n");
    const header = parseRecord(first);
    if (header?.kind !== "archive") continue;
    const records = lines.map(parseRecord);
    const entries = records.flatMap((record) => (record?.kind === "entry" ? [record.entry] : []));
    const sequence = Number(/-(\d+)\.jsonl$/.exec(name)?.[1] ?? 0);
    archives.push({ archivedAt: header.archivedAt, generation: header.generation, sequence, entries });
  }
  archives.sort(
    (left, right) => left.archivedAt - right.archivedAt || left.generation - right.generation || left.sequence - right.sequence,
  );
  return archives.flatMap((archive) => archive.entries);
}
