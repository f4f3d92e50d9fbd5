/**
 * bubblewrap (`bwrap`) isolation for exec: the command sees a read-only system (/usr, /bin, /lib*,
 * /etc), a fresh /tmp, its workspace read-write, and nothing else of the host's files; all
 * namespaces are unshared (no network, no view of other processes) and it dies with its parent.
 * Unlike the pattern filter this is a real wall, which is why `auto` uses it whenever it works.
 */
import { spawn } from "node:child_process";
import { accessSync, constants, lstatSync, readlinkSync } from "node:fs";
import path from "node:path";

export type SandboxMode = "auto" | "bwrap" | "none";

export type SandboxChoice = { kind: "bwrap"; bwrapPath: string } | { kind: "none" } | { kind: "unavailable"; message: string };

/** One top-level system path as it is on the host: a directory to bind, or a symlink to recreate. */
export interface RootEntry {
  path: string;
  kind: "directory" | "symlink";
  /** For symlinks: the link text (`usr/bin` for a merged-/usr `/bin`). */
  target?: string;
}

export interface BwrapArgsOptions {
  workspace: string;
  command: string;
  /** Host layout of the system paths, from `probeRootLayout()`. */
  layout: RootEntry[];
  /** Off by default: `--unshare-all` takes the network away too. */
  shareNetwork?: boolean;
  shell?: string;
}

const SYSTEM_PATHS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"];

/** The first executable called `name` on `searchPath`, like `command -v`. */
export function findExecutable(name: string, searchPath: string = process.env.PATH ?? ""): string | undefined {
  for (const directory of searchPath.split(path.delimiter)) {
    if (!directory) continue;
    const candidate = path.join(directory, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here; keep looking.
    }
  }
  return undefined;
}

/** What `mode` means on this machine. `bwrap` without the binary is a configuration problem, said plainly. */
export function chooseSandbox(mode: SandboxMode, find: (name: string) => string | undefined = findExecutable): SandboxChoice {
  if (mode === "none") return { kind: "none" };
  const bwrapPath = find("bwrap");
  if (bwrapPath) return { kind: "bwrap", bwrapPath };
  if (mode === "auto") return { kind: "none" };
  return {
    kind: "unavailable",
    message: 'exec is configured with tools.exec.sandbox "bwrap", but the bwrap program is not installed on this machine, so no command can run',
  };
}

/** How the system paths look on this host (merged /usr makes /bin a symlink, and so on). */
export function probeRootLayout(paths: string[] = SYSTEM_PATHS): RootEntry[] {
  const layout: RootEntry[] = [];
  for (const entry of paths) {
    try {
      const info = lstatSync(entry);
      if (info.isSymbolicLink()) layout.push({ path: entry, kind: "symlink", target: readlinkSync(entry) });
      else if (info.isDirectory()) layout.push({ path: entry, kind: "directory" });
    } catch {
      // Absent on this system (no /lib32, say): nothing to bind.
    }
  }
  return layout;
}

/** The bwrap argument list that runs `command` with `/bin/sh -c` inside the sandbox. */
export function buildBwrapArgs(options: BwrapArgsOptions): string[] {
  const args = ["--die-with-parent", "--unshare-all"];
  if (options.shareNetwork) args.push("--share-net");
  // A new session keeps the command from pushing input into the gateway's terminal (TIOCSTI).
  args.push("--new-session");
  for (const entry of options.layout) {
    if (entry.kind === "symlink" && entry.target !== undefined) args.push("--symlink", entry.target, entry.path);
    else args.push("--ro-bind", entry.path, entry.path);
  }
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");
  // After /tmp, so a workspace under /tmp is bound on top of the fresh tmpfs.
  args.push("--bind", options.workspace, options.workspace, "--chdir", options.workspace);
  args.push("--", options.shell ?? "/bin/sh", "-c", options.command);
  return args;
}

/**
 * Whether bwrap can actually build its sandbox here: it is installed in containers that forbid
 * user namespaces, where every command would fail.
 */
export function probeBwrap(bwrapPath: string, workspace: string, layout: RootEntry[] = probeRootLayout()): Promise<{ ok: true } | { ok: false; message: string }> {
  return new Promise((resolve) => {
    const child = spawn(bwrapPath, buildBwrapArgs({ workspace, command: "exit 0", layout }), { stdio: ["ignore", "ignore", "pipe"], env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk.slice(0, 500);
    });
    child.on("error", (error) => resolve({ ok: false, message: error.message }));
    child.on("close", (code) => resolve(code === 0 ? { ok: true } : { ok: false, message: stderr.trim() || `bwrap exited with code ${code}` }));
  });
}
