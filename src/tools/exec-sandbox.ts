/**
 * bubblewrap (`bwrap`) isolation for exec: the command sees a read-only system (/usr, /bin, /lib*),
 * only the parts of /etc that programs need (no shadow, no sudoers, no private keys), a passwd and
 * group of its own, a fresh /tmp, its workspace read-write, and nothing else of the host's files.
 * It runs as uid/gid 65534 (nobody) in its own user namespace, with no capabilities, so even when
 * CountBot runs as root the command is not root; all namespaces are unshared (no network, its own
 * PID namespace: when the command ends, everything it started dies with it, `setsid` or not) and
 * it dies with its parent. Unlike the pattern filter this is a real wall, which is why exec runs
 * nowhere else unless the operator opts out explicitly (`tools.exec.sandbox: "none"`).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, lstatSync, readlinkSync } from "node:fs";
import path from "node:path";
import type { Writable } from "node:stream";

export type SandboxMode = "auto" | "bwrap" | "none";

export type SandboxChoice = { kind: "bwrap"; bwrapPath: string } | { kind: "none" } | { kind: "unavailable"; message: string };

/** The uid and gid commands run as inside the sandbox (`nobody`/`nogroup`). */
export const SANDBOX_UID = 65534;

/** A file whose content bwrap reads from a descriptor and binds read-only (`--ro-bind-data`). */
export interface SandboxFile {
  path: string;
  content: string;
}

/** One system path as it is on the host: a directory or file to bind, or a symlink to recreate. */
export interface RootEntry {
  path: string;
  kind: "directory" | "file" | "symlink";
  /** For symlinks: the link text (`usr/bin` for a merged-/usr `/bin`). */
  target?: string;
}

export interface BwrapArgsOptions {
  workspace: string;
  command: string;
  /** Host layout of the system paths, from `probeRootLayout()` (and the /etc entries, `probeEtcLayout()`). */
  layout: RootEntry[];
  /**
   * Files bound from descriptors 3, 4, ... in order (`sandboxIdentity()`): the caller spawns bwrap
   * with that many extra pipes and writes each content into its pipe.
   */
  files?: SandboxFile[];
  /** Off by default: `--unshare-all` takes the network away too. */
  shareNetwork?: boolean;
  shell?: string;
}

const SYSTEM_PATHS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/**
 * What of /etc a command may see: how to find libraries and alternatives (`awk` is a link through
 * /etc/alternatives on Debian), time zone, certificates (not /etc/ssl/private), name service and
 * locale tables, shell start-up files, interpreters' own settings. Left out on purpose: shadow and
 * gshadow, sudoers, ssh host keys, and files that may hold credentials (npmrc, pip.conf, wgetrc).
 */
const ETC_ENTRIES = [
  "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
  "ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf", "pki",
  "nsswitch.conf", "hosts", "host.conf", "gai.conf", "protocols", "services", "rpc", "ethertypes",
  "os-release", "debian_version", "lsb-release", "mime.types", "magic", "magic.mime",
  "locale.alias", "locale.conf", "default/locale", "inputrc", "profile", "profile.d", "bash.bashrc", "shells", "environment",
  "terminfo", "xdg", "fonts", "gitconfig", "vim", "perl", "python3", "python3.11", "python3.12", "java-17-openjdk", "java-21-openjdk",
];

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

/**
 * What `mode` means on this machine. No sandbox is never a silent fallback: without bwrap, exec
 * refuses every command unless the operator chose `none` (the pattern filter only) explicitly.
 */
export function chooseSandbox(mode: SandboxMode, find: (name: string) => string | undefined = findExecutable): SandboxChoice {
  if (mode === "none") return { kind: "none" };
  const bwrapPath = find("bwrap");
  if (bwrapPath) return { kind: "bwrap", bwrapPath };
  if (mode === "auto") return { kind: "unavailable", message: NO_SANDBOX_MESSAGE };
  return {
    kind: "unavailable",
    message: 'exec is configured with tools.exec.sandbox "bwrap", but the bwrap program is not installed on this machine, so no command can run',
  };
}

/** Why exec refuses to run without a sandbox, and the two ways out. */
export const NO_SANDBOX_MESSAGE =
  'exec is refused: no sandbox is available (bubblewrap is not installed); install bubblewrap, or set tools.exec.sandbox "none" to run commands behind the pattern filter only';

/** The same when bwrap is installed but cannot build its sandbox (a container without user namespaces). */
export function brokenSandboxMessage(reason: string): string {
  return `exec is refused: no sandbox is available (bubblewrap is installed but cannot build its sandbox here: ${reason}); in Docker allow user namespaces (docker-compose.yml), or set tools.exec.sandbox "none" to run commands behind the pattern filter only`;
}

/** How the allowed /etc entries look on this host (symlinks kept as links, the rest bound). */
export function probeEtcLayout(entries: string[] = ETC_ENTRIES): RootEntry[] {
  return probeRootLayout(entries.map((entry) => path.posix.join("/etc", entry)));
}

/** A passwd and group naming only the sandbox's user, whose home is the workspace. */
export function sandboxIdentity(workspace: string): SandboxFile[] {
  return [
    { path: "/etc/passwd", content: `root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:${SANDBOX_UID}:${SANDBOX_UID}:nobody:${workspace}:/bin/sh\n` },
    { path: "/etc/group", content: `root:x:0:\nnogroup:x:${SANDBOX_UID}:\n` },
  ];
}

/** How the system paths look on this host (merged /usr makes /bin a symlink, and so on). */
export function probeRootLayout(paths: string[] = SYSTEM_PATHS): RootEntry[] {
  const layout: RootEntry[] = [];
  for (const entry of paths) {
    try {
      const info = lstatSync(entry);
      if (info.isSymbolicLink()) layout.push({ path: entry, kind: "symlink", target: readlinkSync(entry) });
      else if (info.isDirectory()) layout.push({ path: entry, kind: "directory" });
      else if (info.isFile()) layout.push({ path: entry, kind: "file" });
    } catch {
      // Absent on this system (no /lib32, say): nothing to bind.
    }
  }
  return layout;
}

/** The bwrap argument list that runs `command` with `/bin/sh -c` inside the sandbox. */
export function buildBwrapArgs(options: BwrapArgsOptions): string[] {
  // An unprivileged uid in a user namespace of its own, no capabilities; its own PID namespace, so
  // nothing the command starts outlives it.
  const args = ["--die-with-parent", "--unshare-all", "--unshare-user", "--unshare-pid", "--uid", String(SANDBOX_UID), "--gid", String(SANDBOX_UID), "--cap-drop", "ALL"];
  if (options.shareNetwork) args.push("--share-net");
  // A new session keeps the command from pushing input into the gateway's terminal (TIOCSTI).
  args.push("--new-session");
  // /etc is built entry by entry: a directory of the sandbox's own root, never the host's.
  args.push("--dir", "/etc");
  for (const entry of options.layout) {
    if (entry.kind === "symlink" && entry.target !== undefined) args.push("--symlink", entry.target, entry.path);
    else args.push("--ro-bind", entry.path, entry.path);
  }
  (options.files ?? []).forEach((file, index) => args.push("--ro-bind-data", String(3 + index), file.path));
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
export function probeBwrap(bwrapPath: string, workspace: string, layout: RootEntry[] = [...probeRootLayout(), ...probeEtcLayout()]): Promise<{ ok: true } | { ok: false; message: string }> {
  return new Promise((resolve) => {
    const files = sandboxIdentity(workspace);
    const child = spawn(bwrapPath, buildBwrapArgs({ workspace, command: "exit 0", layout, files }), {
      stdio: ["ignore", "ignore", "pipe", ...files.map(() => "pipe" as const)],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    });
    writeSandboxFiles(child, files);
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk.slice(0, 500);
    });
    child.on("error", (error) => resolve({ ok: false, message: error.message }));
    child.on("close", (code) => resolve(code === 0 ? { ok: true } : { ok: false, message: stderr.trim() || `bwrap exited with code ${code}` }));
  });
}

/** Writes each file's content into its descriptor (3, 4, ...) of a bwrap just spawned with `files`. */
export function writeSandboxFiles(child: ChildProcess, files: SandboxFile[]): void {
  files.forEach((file, index) => {
    const stream = child.stdio[3 + index] as Writable | null | undefined;
    stream?.on("error", () => undefined);
    stream?.end(file.content);
  });
}
