/**
 * Resolves a path a model gave us against the workspace and, when restricted, refuses anything
 * that ends up outside it: `..`, absolute paths, `~`, symlinks pointing out, and sibling
 * directories whose names merely start with the workspace's name (`workspace-evil`).
 */
import { realpath } from "node:fs/promises";
import path from "node:path";
import { ToolError } from "../errors.js";

export interface ResolveOptions {
  /** Absolute, realpath'd workspace root. */
  workspace: string;
  restrictToWorkspace: boolean;
}

/** The absolute real path for `requested`; throws ToolError when it escapes the workspace. */
export async function resolveWorkspacePath(requested: string, options: ResolveOptions): Promise<string> {
  if (requested.includes("\0")) throw new ToolError("the path contains a NUL byte", "Pass a plain relative path.");
  const { workspace } = options;
  const expanded = requested === "~" || requested.startsWith("~/") ? path.join(process.env.HOME ?? "/", requested.slice(1)) : requested;
  const absolute = path.resolve(workspace, expanded);
  const real = await realpathOfDeepestExisting(absolute);
  if (options.restrictToWorkspace && !isInside(real, workspace)) {
    throw new ToolError(
      `path "${requested}" is outside the workspace`,
      "Use a path relative to the workspace root; files outside it are not accessible.",
    );
  }
  return real;
}

export function isInside(candidate: string, root: string): boolean {
  const relative = path.relative(root, candidate);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

/**
 * realpath() of the path, or of its deepest existing ancestor with the rest appended, so a file
 * about to be created is judged by where its directory really is.
 */
async function realpathOfDeepestExisting(absolute: string): Promise<string> {
  const missing: string[] = [];
  let current = absolute;
  for (;;) {
    try {
      const real = await realpath(current);
      return missing.length === 0 ? real : path.join(real, ...missing.reverse());
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
      const parent = path.dirname(current);
      if (parent === current) return absolute;
      missing.push(path.basename(current));
      current = parent;
    }
  }
}
