/**
 * Writes a file so that readers see the old content or the new one, never half of it: a temp file
 * in the same directory, then rename. Shared by write_file and edit_file.
 */
import { randomBytes } from "node:crypto";
import { lstat, mkdir, open, readlink, realpath, rename, stat, unlink } from "node:fs/promises";
import path from "node:path";
import { ToolError } from "../errors.js";
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

  const temporary = path.join(directory, `.${path.basename(target)}.${randomBytes(6).toString("hex")}.tmp`);
  const data = Buffer.from(content, "utf8");
  // "wx" is O_CREAT|O_EXCL: it never follows a symlink planted at the temp name.
  const handle = await open(temporary, "wx", existing ? existing.mode & 0o7777 : 0o644);
  try {
    try {
      if (guard.restrictToWorkspace) await assertOpenedInside(handle.fd, workspace);
      if (existing) await handle.chmod(existing.mode & 0o7777);
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    // rename() replaces the directory entry itself: a symlink at the target is replaced, not followed.
    await rename(temporary, target);
  } catch (error) {
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
  return data.byteLength;
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
