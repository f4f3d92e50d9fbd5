/**
 * File helpers shared by the file store's parts (sessions, tasks, pairing) and by the modules above
 * the store that keep files of their own (memory, tool history, audit log, cron jobs): safe file
 * names for arbitrary keys, an atomic write, and a per-key queue. They live apart from the file
 * store so its parts import them without importing the store that imports them.
 */
import { createHash, randomBytes } from "node:crypto";
import type { FileHandle } from "node:fs/promises";
import { open, rename, unlink } from "node:fs/promises";
import path from "node:path";
import { KeyedLanes } from "../bus/chat-lane.js";

/** Encoded names longer than this are shortened and made unique with a hash (255-byte name limit). */
const MAX_READABLE_NAME = 120;

/**
 * A file name for any key: reversible percent-encoding that keeps only `a-z 0-9 - _` as they are,
 * so `a:b` and `a_b` never collide, `.`, `/` and `\` can never form a path, and names differ by more
 * than letter case (safe on case-insensitive file systems). Very long keys get a readable prefix
 * plus a hash; `~` marks those, since the encoding never emits it.
 */
export function safeFileName(key: string): string {
  if (key.length === 0) throw new Error("a session key must not be empty");
  let encoded = "";
  for (const byte of Buffer.from(key, "utf8")) {
    const character = String.fromCharCode(byte);
    encoded += /[a-z0-9_-]/.test(character) ? character : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  if (encoded.length <= MAX_READABLE_NAME) return encoded;
  const hash = createHash("sha256").update(key).digest("hex").slice(0, 32);
  return `${encoded.slice(0, 64)}~${hash}`;
}

/** The key `safeFileName` made `name` from; undefined for a name it did not make or shortened with a hash. */
export function decodeFileName(name: string): string | undefined {
  try {
    const key = decodeURIComponent(name);
    return safeFileName(key) === name ? key : undefined;
  } catch {
    return undefined; // not a name this store wrote
  }
}

export interface AtomicWriteOptions {
  /** Permission bits the file is created with (the umask applies). Default 0o666. */
  mode?: number;
  /**
   * Runs on the opened temp file before anything is written to it; throwing abandons the write
   * (the temp file is removed, the target left as it was). The file tools check there where the
   * descriptor really points.
   */
  beforeWrite?: (handle: FileHandle) => Promise<void>;
}

/**
 * Writes `content` to `file` so readers see the old content or the new, never a mix: a hidden temp
 * file beside it, fsync, rename. Returns the bytes written. The directory must exist.
 */
export async function writeFileAtomic(file: string, content: string, options: AtomicWriteOptions = {}): Promise<number> {
  const temporary = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString("hex")}.tmp`);
  const data = Buffer.from(content, "utf8");
  // "wx" is O_CREAT|O_EXCL: it never follows a symlink planted at the temp name. Outside the try:
  // a temp file we did not create is not ours to remove.
  const handle = await open(temporary, "wx", options.mode ?? 0o666);
  try {
    try {
      await options.beforeWrite?.(handle);
      await handle.writeFile(data);
      // Without it a power loss after the rename can leave an empty file on some file systems.
      await handle.sync();
    } finally {
      await handle.close();
    }
    // rename() replaces the directory entry itself: a symlink at the target is replaced, not followed.
    await rename(temporary, file);
  } catch (error) {
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
  return data.byteLength;
}

/** Runs operations one after another per key; different keys run concurrently. */
export interface KeyedQueue {
  run<T>(key: string, operation: () => Promise<T>): Promise<T>;
  /** Resolves when everything queued so far has settled. */
  drain(): Promise<void>;
}

export function createKeyedQueue(): KeyedQueue {
  const lanes = new KeyedLanes();
  return { run: (key, operation) => lanes.run(key, operation), drain: () => lanes.idle() };
}
