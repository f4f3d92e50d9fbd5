/**
 * The file tools' atomic write (write_file, edit_file, spilled tool results): the store's plain
 * write (../store/file-io.ts: temp file, fsync, rename) behind the workspace guard. The guard needs
 * no write path of its own: its checks come before the write (directories, the target) and, through
 * `beforeWrite`, on the opened temp file before a byte is written to it, which is where a directory
 * swapped for a symlink in the meantime shows.
 */
import { lstat, mkdir, readlink, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { ToolError } from "../errors.js";
import { writeFileAtomic as writeFileAtomicUnguarded } from "../store/file-io.js";
import { isInside } from "./workspace-path.js";

export interface AtomicWriteGuard {
  /** Absolute, realpath'd workspace root. */
  workspace: string;
  restrictToWorkspace: boolean;
}

/**
 * Writes `content` to `target` (an already resolved real path) atomically and returns the bytes
 * written. Parent directories are created. When restricted, the directory and the opened temp file
 * are checked again after creation, so a directory swapped for a symlink in the meantime is caught.
 */
export async function writeFileAtomic(target: string, content: string, guard: AtomicWriteGuard): Promise<number> {
  const directory = path.dirname(target);
  const workspace = await realpath(guard.workspace).catch(() => guard.workspace);
  if (guard.restrictToWorkspace) {
    await makeDirectoriesInside(directory, workspace);
    if (!isInside(await realpath(directory), workspace)) throw outside(target);
  } else {
    await mkdir(directory, { recursive: true });
  }
  const existing = await stat(target).catch(() => undefined);
  if (existing?.isDirectory()) throw new ToolError(`"${path.basename(target)}" is a directory`, "Choose a file name, not a directory.");

  // The temp file is created "wx" (O_EXCL), so a symlink planted at its name is never followed.
  return writeFileAtomicUnguarded(target, content, {
    mode: existing ? existing.mode & 0o7777 : 0o644,
    beforeWrite: async (handle) => {
      if (guard.restrictToWorkspace) await assertOpenedInside(handle.fd, workspace);
      if (existing) await handle.chmod(existing.mode & 0o7777);
    },
  });
}

/**
 * mkdir -p that refuses to descend through a symlink, so a directory swapped for a link after the
 * path was resolved cannot make us create directories elsewhere.
 */
async function makeDirectoriesInside(directory: string, workspace: string): Promise<void> {
  if (!isInside(directory, workspace)) throw outside(directory);
  let current = workspace;
  for (const name of path.relative(workspace, directory).split(path.sep).filter(Boolean)) {
    current = path.join(current, name);
    await mkdir(current).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw error;
    });
    const info = await lstat(current);
    if (info.isSymbolicLink() || !info.isDirectory()) {
      throw new ToolError(`"${path.relative(workspace, current)}" is not a plain directory`, "Write to a path whose directories are real directories inside the workspace.");
    }
  }
}

function outside(target: string): ToolError {
  return new ToolError(`"${path.basename(target)}" resolves outside the workspace`, "Write to a path inside the workspace.");
}

/** Linux tells us where an open descriptor really is; elsewhere the earlier checks must do. */
async function assertOpenedInside(fd: number, workspace: string): Promise<void> {
  const opened = await readlink(`/proc/self/fd/${fd}`).catch(() => undefined);
  if (opened !== undefined && opened.startsWith("/") && !isInside(opened, workspace)) {
    throw outside(opened);
  }
}
