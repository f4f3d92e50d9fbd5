/**
 * Resolves a path a model gave us against the workspace and, when restricted, refuses anything
 * that ends up outside it: `..`, absolute paths, `~` and `~user`, symlinks pointing out (at any
 * depth, dangling ones included, since writing through them would create their target), and
 * sibling directories whose names merely start with the workspace's name (`workspace-evil`).
 *
 * The tools then work on the returned real path, never on the text the model sent, so a symlink
 * in the request cannot redirect the operation. What remains is a race with another process that
 * swaps a directory for a symlink between this check and the use: workspace-files.ts closes it by
 * opening the returned path component by component without following links.
 */
import { lstat, readlink, realpath } from "node:fs/promises";
import path from "node:path";
import { ToolError } from "../errors.js";

export interface ResolveOptions {
  /** Absolute, realpath'd workspace root. */
  workspace: string;
  restrictToWorkspace: boolean;
}

/** The kernel's own limit (Linux MAXSYMLINKS); more hops than this is a loop. */
const MAX_SYMLINK_HOPS = 40;

const OUTSIDE_HINT = "Use a path relative to the workspace root; files outside it are not accessible.";

/** The absolute real path for `requested`; throws ToolError when it escapes the workspace. */
export async function resolveWorkspacePath(requested: string, options: ResolveOptions): Promise<string> {
  if (requested.includes("\0")) throw new ToolError("the path contains a NUL byte", "Pass a plain relative path.");
  const restricted = options.restrictToWorkspace;
  if (restricted && requested.startsWith("~")) {
    throw new ToolError(
      `path "${requested}" points into a home directory, outside the workspace`,
      requested === "~" || requested.startsWith("~/") ? OUTSIDE_HINT : `${OUTSIDE_HINT} For a file whose name starts with ~, write ./${requested}.`,
    );
  }
  const expanded = requested === "~" || requested.startsWith("~/") ? path.join(process.env.HOME ?? "/", requested.slice(1)) : requested;
  // The workspace is documented as realpath'd; resolving it again costs one call and keeps a
  // caller that forgot (macOS /tmp, say) from being refused everything.
  const workspace = await realpath(options.workspace).catch(() => path.resolve(options.workspace));
  const real = await resolveReal(path.resolve(workspace, expanded));
  if (restricted && !isInside(real, workspace)) {
    throw new ToolError(`path "${requested}" is outside the workspace`, OUTSIDE_HINT);
  }
  return real;
}

/** Whether `candidate` is `root` or below it. Both must be absolute and normalized. */
export function isInside(candidate: string, root: string): boolean {
  const relative = path.relative(root, candidate);
  if (relative === "") return true;
  // `..foo` is a legitimate name inside the root; only a `..` segment climbs out.
  return relative !== ".." && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative);
}

/** The path as the model should name it next time: relative when inside the workspace. */
export function workspaceRelative(file: string, workspace: string): string {
  return isInside(file, workspace) ? path.relative(workspace, file) || "." : file;
}

/**
 * Where `absolute` really leads, walking it component by component as the kernel would: every
 * symlink is followed, including dangling ones (their target is where a write would land) and
 * ones whose target does not exist yet. Components past the first missing one are appended as
 * they are.
 */
async function resolveReal(absolute: string): Promise<string> {
  const pending = absolute.split(path.sep).filter(Boolean);
  let resolved = path.parse(absolute).root;
  let hops = 0;
  while (pending.length > 0) {
    const name = pending.shift() as string;
    if (name === ".") continue;
    if (name === "..") {
      resolved = path.dirname(resolved);
      continue;
    }
    const candidate = path.join(resolved, name);
    const info = await lstat(candidate).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT" || error.code === "ENOTDIR") return undefined;
      throw error;
    });
    if (!info) return path.join(candidate, ...pending);
    if (!info.isSymbolicLink()) {
      resolved = candidate;
      continue;
    }
    hops += 1;
    if (hops > MAX_SYMLINK_HOPS) throw new ToolError("the path has too many levels of symbolic links", "Pass a path without a symlink loop.");
    const target = await readlink(candidate);
    if (path.isAbsolute(target)) resolved = path.parse(target).root;
    pending.unshift(...target.split(path.sep).filter(Boolean));
  }
  return resolved;
}
