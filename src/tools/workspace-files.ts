/**
 * The one file-access layer under every file tool (read_file, write_file, edit_file, list_dir,
 * spilled tool results) and the memory store, so a wall added here holds everywhere.
 *
 * A path is first resolved and checked as text (workspace-path.ts). That check alone races with
 * any process that swaps a directory for a symlink before the open (exec can run one), so the
 * open does not trust the text: it walks the resolved path one component at a time from an open
 * descriptor of the workspace, opening each directory with O_NOFOLLOW through
 * `/proc/self/fd/<fd>/<name>` (Node has no openat; the magic link names exactly the directory
 * already opened). The resolved path holds no symlink, so a link met on the way was swapped in:
 * the open fails (ELOOP) instead of following it. Temp files are created, renamed and removed
 * through the same directory descriptor, so cleanup never lands anywhere else.
 *
 * Only regular files are read (and directories listed): FIFOs, devices and sockets are refused
 * from an lstat before the open, and the open itself is non-blocking, so a special file swapped
 * in after the lstat cannot stall a thread of the pool either. A regular file with more than one
 * hard link may be a file from outside the workspace and is refused when restricted.
 */
import { randomBytes } from "node:crypto";
import { constants, existsSync, type Stats } from "node:fs";
import { type FileHandle, lstat, mkdir, open, readdir, realpath, rename, unlink } from "node:fs/promises";
import type { Dirent } from "node:fs";
import path from "node:path";
import { ToolError } from "../errors.js";
import { isInside, resolveWorkspacePath } from "./workspace-path.js";

export interface WorkspaceGuard {
  /** The workspace root (realpath'd once more here). */
  workspace: string;
  restrictToWorkspace: boolean;
}

/** Linux names an open descriptor's directory through /proc; elsewhere paths are used as they are. */
const DESCRIPTOR_PATHS = existsSync("/proc/self/fd");
const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY, O_DIRECTORY } = constants;
const OPEN_DIRECTORY = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;
const OPEN_FILE = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;

const OUTSIDE_HINT = "Use a path relative to the workspace root; files outside it are not accessible.";

/** An open directory and how to name an entry in it without resolving its path again. */
interface OpenDirectory {
  handle: FileHandle;
  /** The directory's real path, for messages and for the platforms without /proc. */
  path: string;
  entry(name: string): string;
}

export interface ReadResult {
  /** The real path that was read. */
  file: string;
  data: Buffer;
  /** The file's whole size; `data` is shorter when it was cut at `maxBytes`. */
  size: number;
}

export interface ReadOptions {
  /** Read at most this many bytes; default the whole file. */
  maxBytes?: number;
  /** Refuse a file larger than this before reading it (edit_file's limit). */
  refuseAboveBytes?: number;
}

/** Resolves `requested` and reads it as a regular file. Missing files throw ToolError with `code` ENOENT in `cause`. */
export async function readWorkspaceFile(requested: string, guard: WorkspaceGuard, options: ReadOptions = {}): Promise<ReadResult> {
  const file = await resolveWorkspacePath(requested, guard);
  return readResolvedFile(file, requested, guard, options);
}

/** Reads an already resolved real path (the memory store's own files). */
export async function readResolvedFile(file: string, shown: string, guard: WorkspaceGuard, options: ReadOptions = {}): Promise<ReadResult> {
  const parent = await openParent(file, shown, guard, false);
  try {
    const handle = await openEntry(parent, path.basename(file), shown, "file");
    try {
      const info = await handle.stat();
      if (guard.restrictToWorkspace && info.nlink > 1) {
        throw new ToolError(`"${shown}" has ${info.nlink} hard links, so it may be a file from outside the workspace`, "Copy the content into a new file instead of linking it.");
      }
      if (options.refuseAboveBytes !== undefined && info.size > options.refuseAboveBytes) {
        throw new ToolError(`"${shown}" has ${info.size} bytes, more than the ${options.refuseAboveBytes}-byte limit`, "Use a smaller file, or exec with a tool made for large files.");
      }
      const length = Math.min(info.size, options.maxBytes ?? info.size);
      const data = Buffer.alloc(length);
      let filled = 0;
      while (filled < length) {
        const { bytesRead } = await handle.read(data, filled, length - filled, filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return { file, data: data.subarray(0, filled), size: info.size };
    } finally {
      await handle.close();
    }
  } finally {
    await parent.handle.close();
  }
}

/** Resolves `requested` and lists it as a directory. */
export async function listWorkspaceDirectory(requested: string, guard: WorkspaceGuard): Promise<Dirent[]> {
  const directory = await resolveWorkspacePath(requested, guard);
  const opened = await openDirectoryPath(directory, requested, guard, false);
  try {
    return await readdir(DESCRIPTOR_PATHS ? `/proc/self/fd/${opened.handle.fd}` : opened.path, { withFileTypes: true });
  } finally {
    await opened.handle.close();
  }
}

export interface WriteOptions {
  /** Permission bits of a new file (an existing file keeps its own). Default 0o644. */
  mode?: number;
}

/**
 * Writes `content` to the resolved real path `file` atomically (temp file beside it, fsync,
 * rename), creating missing parent directories, all through directory descriptors. Returns the
 * bytes written.
 */
export async function writeResolvedFile(file: string, shown: string, content: string, guard: WorkspaceGuard, options: WriteOptions = {}): Promise<number> {
  const parent = await openParent(file, shown, guard, true);
  const name = path.basename(file);
  const temporary = `.${name}.${randomBytes(6).toString("hex")}.tmp`;
  const data = Buffer.from(content, "utf8");
  try {
    const existing = await lstat(parent.entry(name)).catch(() => undefined);
    if (existing?.isDirectory()) throw new ToolError(`"${shown}" is a directory`, "Choose a file name, not a directory.");
    const mode = existing?.isFile() ? existing.mode & 0o7777 : (options.mode ?? 0o644);
    // "wx" is O_CREAT|O_EXCL: it never follows a symlink planted at the temp name. Outside the
    // try: a temp file we did not create is not ours to remove.
    const handle = await open(parent.entry(temporary), "wx", mode);
    try {
      try {
        if (existing?.isFile()) await handle.chmod(mode);
        await handle.writeFile(data);
        // Without it a power loss after the rename can leave an empty file on some file systems.
        await handle.sync();
      } finally {
        await handle.close();
      }
      // rename() replaces the directory entry itself: a symlink at the target is replaced, not followed.
      await rename(parent.entry(temporary), parent.entry(name));
    } catch (error) {
      await unlink(parent.entry(temporary)).catch(() => undefined);
      throw error;
    }
  } finally {
    await parent.handle.close();
  }
  return data.byteLength;
}

/** Resolves `requested`, then writes it like writeResolvedFile. Returns the real path and the bytes written. */
export async function writeWorkspaceFile(requested: string, content: string, guard: WorkspaceGuard): Promise<{ file: string; bytes: number }> {
  const file = await resolveWorkspacePath(requested, guard);
  return { file, bytes: await writeResolvedFile(file, requested, content, guard) };
}

/** Renames a file within its directory (the memory store's archive), through the directory's descriptor. */
export async function renameInDirectory(file: string, newName: string, guard: WorkspaceGuard): Promise<void> {
  if (newName.includes("/") || newName === "." || newName === "..") throw new Error(`"${newName}" is not a plain file name`);
  const parent = await openParent(file, file, guard, false);
  try {
    const info = await lstat(parent.entry(path.basename(file)));
    if (!info.isFile()) throw notRegular(file, info);
    await rename(parent.entry(path.basename(file)), parent.entry(newName));
  } finally {
    await parent.handle.close();
  }
}

/** Opens the directory holding `file`, walking from the workspace (or `/` when unrestricted). */
async function openParent(file: string, shown: string, guard: WorkspaceGuard, create: boolean): Promise<OpenDirectory> {
  return openDirectoryPath(path.dirname(file), shown, guard, create, "file");
}

/** `target`: what `shown` names, for the message when a directory on the way is missing. */
async function openDirectoryPath(directory: string, shown: string, guard: WorkspaceGuard, create: boolean, target: "file" | "directory" = "directory"): Promise<OpenDirectory> {
  const workspace = await realpath(guard.workspace).catch(() => path.resolve(guard.workspace));
  const base = guard.restrictToWorkspace ? workspace : path.parse(directory).root;
  if (!isInside(directory, base)) throw new ToolError(`path "${shown}" is outside the workspace`, OUTSIDE_HINT);
  // The workspace itself is the operator's; its own path may contain symlinks (macOS /tmp).
  let current: OpenDirectory = directoryAt(await open(base, O_RDONLY | O_DIRECTORY), base);
  try {
    for (const name of path.relative(base, directory).split(path.sep).filter(Boolean)) {
      if (create) {
        await mkdir(current.entry(name)).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== "EEXIST") throw error;
        });
      }
      const next = await openEntry(current, name, shown, "directory", target);
      await current.handle.close();
      current = directoryAt(next, path.join(current.path, name));
    }
    return current;
  } catch (error) {
    await current.handle.close().catch(() => undefined);
    throw error;
  }
}

function directoryAt(handle: FileHandle, directory: string): OpenDirectory {
  return { handle, path: directory, entry: (name) => (DESCRIPTOR_PATHS ? `/proc/self/fd/${handle.fd}/${name}` : path.join(directory, name)) };
}

/**
 * Opens `name` in `parent` as a directory or a regular file, never through a symlink and never
 * blocking: lstat first (a FIFO is refused before any open), then a non-blocking no-follow open
 * and an fstat that must show the same inode.
 */
async function openEntry(parent: OpenDirectory, name: string, shown: string, kind: "file" | "directory", target = kind): Promise<FileHandle> {
  const entry = parent.entry(name);
  const before = await lstat(entry).catch((error: NodeJS.ErrnoException) => {
    throw openError(error, shown, target);
  });
  if (before.isSymbolicLink()) throw swapped(shown);
  if (kind === "directory" && !before.isDirectory()) {
    throw before.isFile() && kind === target
      ? new ToolError(`"${shown}" is a file, not a directory`, "Use read_file to read it.")
      : new ToolError(`"${shown}" is not a directory`, "Give the path of a directory.");
  }
  if (kind === "file" && before.isDirectory()) throw new ToolError(`"${shown}" is a directory`, "Use list_dir to see its contents.");
  if (kind === "file" && !before.isFile()) throw notRegular(shown, before);
  const handle = await open(entry, kind === "directory" ? OPEN_DIRECTORY : OPEN_FILE).catch((error: NodeJS.ErrnoException) => {
    throw openError(error, shown, target);
  });
  try {
    const after = await handle.stat();
    const same = after.ino === before.ino && after.dev === before.dev;
    if (!same || (kind === "file" ? !after.isFile() : !after.isDirectory())) throw swapped(shown);
    return handle;
  } catch (error) {
    await handle.close();
    throw error;
  }
}

function openError(error: NodeJS.ErrnoException, shown: string, kind: "file" | "directory"): Error {
  switch (error.code) {
    case "ENOENT":
      return new ToolError(`${kind} "${shown}" does not exist`, kind === "file" ? "Check the name with list_dir." : "List its parent to see what exists.", { cause: error });
    case "ENOTDIR":
      return new ToolError(`a directory on the path "${shown}" is not a directory`, "Give a path whose directories exist.", { cause: error });
    case "ELOOP":
      return swapped(shown);
    default:
      return error;
  }
}

/** A symlink where the resolved path had a real directory or file: something swapped it in since. */
function swapped(shown: string): ToolError {
  return new ToolError(`path "${shown}" changed while it was being opened (a symlink appeared), so it may lead outside the workspace`, "Try again; do not replace workspace directories with links.");
}

function notRegular(shown: string, info: Stats): ToolError {
  const kind = info.isFIFO() ? "a FIFO" : info.isSocket() ? "a socket" : info.isCharacterDevice() || info.isBlockDevice() ? "a device" : "a special file";
  return new ToolError(`"${shown}" is ${kind}, not a regular file`, "Only regular text files can be read or edited.");
}

/** Whether an error is the "does not exist" refusal (the memory store reads a missing file as empty). */
export function isMissing(error: unknown): boolean {
  return error instanceof ToolError && (error.cause as NodeJS.ErrnoException | undefined)?.code === "ENOENT";
}
