/**
 * File helpers shared by the file store's parts (sessions, tasks, pairing) and by the modules above
 * the store that keep files of their own (memory, tool history, audit log, cron jobs): safe file
 * names for arbitrary keys, an atomic write, and a per-key queue. They live apart from the file
 * store so its parts import them without importing the store that imports them.
 */
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { open, rename, unlink } from "node:fs/promises";
import path from "node:path";
import { type Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
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
  // Every run of other characters becomes its UTF-8 bytes as %XX (a session key has one or two).
  const encoded = key.replace(/[^a-z0-9_-]+/g, (run) => {
    let bytes = "";
    for (const byte of Buffer.from(run, "utf8")) bytes += `%${byte < 16 ? "0" : ""}${byte.toString(16).toUpperCase()}`;
    return bytes;
  });
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
/** Thrown by {@link saveStream} when more bytes arrive than it may keep. */
export class OverSizeError extends Error {
  override name = "OverSizeError";
  constructor(readonly maxBytes: number) {
    super(`more than ${maxBytes} bytes`);
  }
}

/**
 * Streams `source` into `target`, keeping at most `maxBytes` (the bytes that arrive count, whatever
 * size was announced): into a temporary file beside it, renamed once whole, so `target` appears
 * complete or not at all. Past the cap it throws OverSizeError; on that or any other failure (the
 * source, the disk, `signal`) no file is left behind. Every platform's attachment download uses it.
 */
export async function saveStream(source: Readable, target: string, maxBytes: number, signal?: AbortSignal): Promise<void> {
  let received = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      callback(received > maxBytes ? new OverSizeError(maxBytes) : null, chunk);
    },
  });
  const temporary = `${target}.${randomBytes(6).toString("hex")}.part`;
  const file = createWriteStream(temporary);
  try {
    await pipeline(source, cap, file, signal ? { signal } : {});
    await rename(temporary, target);
  } catch (error) {
    // The pipeline can fail while the file is still being opened: removed before that open lands,
    // it would be created afterwards and stay. Removed once the stream has let go of it.
    if (!file.closed) await once(file, "close").catch(() => undefined);
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
}

export interface KeyedQueue {
  run<T>(key: string, operation: () => Promise<T>): Promise<T>;
  /** Resolves when everything queued so far has settled. */
  drain(): Promise<void>;
}

export function createKeyedQueue(): KeyedQueue {
  const lanes = new KeyedLanes();
  return { run: (key, operation) => lanes.run(key, operation), drain: () => lanes.idle() };
}
