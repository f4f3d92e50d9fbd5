/**
 * Long-term memory: Markdown text per chat (or one shared by every chat) that the agent reads into
 * its prompt and edits with the memory tool. Two implementations behind one contract, chosen by
 * the composition root (src/app/infrastructure.ts):
 *
 * - files (one process, `countbot start` without Redis, `countbot agent`): `MEMORY.md` files in
 *   the workspace, so the user can read and fix them with an editor.
 *   - global scope: every session shares `<workspace>/memory/MEMORY.md`.
 *   - chat scope: each session has `<workspace>/memory/chats/<safe name>/MEMORY.md`.
 *   - person scope: keyed by a person (`discord:123`, or the name config links their identities
 *     under, see ./person-memory.ts), not a session: `<workspace>/memory/people/<safe name>/MEMORY.md`.
 * - Redis (./redis-memory.ts, gateways and workers): the same text under the deployment's prefix,
 *   so a chat's memory follows it to whichever worker serves it; `countbot memory export|import`
 *   turns it into a Markdown file and back.
 *
 * In chat scope, search also looks in the global memory, which the operator can keep for facts
 * every chat should know.
 */
import { lstatSync } from "node:fs";
import { mkdir, open, realpath, rm, stat } from "node:fs/promises";
import path from "node:path";
import { ToolError } from "../errors.js";
import { sleep } from "../sleep.js";
import { createKeyedQueue, safeFileName } from "../store/file-io.js";
import { type WorkspaceGuard, isMissing, readResolvedFile, renameInDirectory, writeResolvedFile } from "../tools/workspace-files.js";

/** `chat` and `global` are the deployment's choice for chats (`memory.scope`); `person` is the third store, beside it. */
export type MemoryScope = "chat" | "global" | "person";

/** One line that matched a search. */
export interface MemoryMatch {
  /** Where the line is: the memory's {@link MemoryStore.location}. */
  file: string;
  /** 1-based line number. */
  line: number;
  text: string;
}

/** The memory contract; the file and Redis implementations pass one conformance suite. */
export interface MemoryStore {
  readonly scope: MemoryScope;
  /**
   * Where the session's memory is kept, for the model and the operator: a path relative to the
   * workspace with `/` separators (`memory/chats/<name>/MEMORY.md`), or the same path behind
   * `redis:` when it is kept in Redis.
   */
  location(sessionKey: string): string;
  /** The session's memory; empty when there is none yet. */
  read(sessionKey: string): Promise<string>;
  /** Replaces the session's memory. Throws ToolError when over the size cap. */
  write(sessionKey: string, content: string): Promise<void>;
  /**
   * Adds `text` as a new section headed with the current date and time (UTC). Atomic: appends from
   * several processes at once all land. Throws ToolError (and changes nothing) when over the cap.
   */
  append(sessionKey: string, text: string): Promise<void>;
  /**
   * Lines containing `query`, ignoring case: the session's memory first, then (chat scope) the
   * global memory. An empty query matches nothing.
   */
  search(sessionKey: string, query: string): Promise<MemoryMatch[]>;
  /**
   * Moves the session's memory aside, still readable by the operator, and starts it again with one
   * line naming where the old text went. Resolves with that place (a location like the memory's).
   */
  archive(sessionKey: string): Promise<string>;
}

export interface MemoryStoreOptions {
  scope: MemoryScope;
  /** Largest memory in bytes (UTF-8); a write that would exceed it is refused. Default 64 KiB. */
  maxBytes?: number;
  /** Clock in ms since epoch, for the date of appended sections. */
  now?: () => number;
}

export interface FileMemoryStoreOptions extends MemoryStoreOptions {
  /** Workspace root; memory lives under `<workspace>/memory`. */
  workspace: string;
  /** Another process's lock on a memory file older than this is taken to be left by a crash. Default 10 s. */
  staleLockMs?: number;
}

export const DEFAULT_MEMORY_MAX_BYTES = 64 * 1024;

/** The memory's path relative to the workspace, with `/` separators: the file store's file, the Redis store's name. */
export function memoryPathOf(scope: MemoryScope, sessionKey: string): string {
  if (scope === "global") return "memory/MEMORY.md";
  return `memory/${scope === "person" ? "people" : "chats"}/${safeFileName(sessionKey)}/MEMORY.md`;
}

/** `current` with `text` added as a section dated `time`, as both stores append it. */
export function withSection(current: string, text: string, time: number): string {
  const section = `## ${formatDate(time)}\n\n${text.trim()}\n`;
  if (current.trim() === "") return section;
  return `${current}${current.endsWith("\n") ? "\n" : "\n\n"}${section}`;
}

/** Throws the ToolError the model reads when `content` would not fit. */
export function checkMemorySize(location: string, bytes: number, maxBytes: number): void {
  if (bytes <= maxBytes) return;
  throw new ToolError(
    `the memory file ${location} would be ${formatSize(bytes)}, over its ${formatSize(maxBytes)} limit, so nothing was saved`,
    'Condense it: read the memory, then use action "write" with a shorter version that keeps only lasting facts.',
  );
}

/** The lines of `content` that contain `query` (already trimmed and lower-cased). */
export function matchingLines(location: string, content: string, needle: string): MemoryMatch[] {
  const matches: MemoryMatch[] = [];
  content.split(/\r?\n/).forEach((text, index) => {
    if (text.toLowerCase().includes(needle)) matches.push({ file: location, line: index + 1, text });
  });
  return matches;
}

/** The search both stores run: the session's memory, then the global one in chat scope. */
export async function searchMemory(
  store: Pick<MemoryStore, "scope" | "location">,
  read: (location: "session" | "global") => Promise<string>,
  sessionKey: string,
  query: string,
  globalLocation: string,
): Promise<MemoryMatch[]> {
  const needle = query.trim().toLowerCase();
  if (needle === "") return [];
  const matches = matchingLines(store.location(sessionKey), await read("session"), needle);
  if (store.scope === "chat") matches.push(...matchingLines(globalLocation, await read("global"), needle));
  return matches;
}

/** `MEMORY-until-2025-06-01-1748781000000.md`: the name an archived memory gets beside the current one. */
export function archiveNameOf(time: number): string {
  return `MEMORY-until-${new Date(time).toISOString().slice(0, 10)}-${time}.md`;
}

/** Memory in `MEMORY.md` files in the workspace. */
export function createFileMemoryStore(options: FileMemoryStoreOptions): MemoryStore {
  const { workspace, scope } = options;
  const maxBytes = options.maxBytes ?? DEFAULT_MEMORY_MAX_BYTES;
  const now = options.now ?? Date.now;
  const staleLockMs = options.staleLockMs ?? 10_000;
  // Append is read-modify-write: in this process a queue per file orders them, across processes
  // (a CLI import while the bot runs, workers on one shared workspace) a lock file beside it.
  const queue = createKeyedQueue();

  const relativeOf = (sessionKey: string) => memoryPathOf(scope, sessionKey);
  const fileOf = (sessionKey: string) => path.join(workspace, ...relativeOf(sessionKey).split("/"));
  const globalFile = path.join(workspace, "memory", "MEMORY.md");
  // The files live in the workspace, where exec can swap them for links: every read and write goes
  // through the file tools' own wall (../tools/workspace-files.ts), whatever tools.restrictToWorkspace says.
  const guard: WorkspaceGuard = { workspace, restrictToWorkspace: true };
  const shown = (file: string) => path.relative(workspace, file).split(path.sep).join("/");

  async function readIfExists(file: string): Promise<string> {
    // Most chats have no memory: say so without the walled open throwing ENOENT (an error built,
    // its stack captured) on every turn.
    if (missingInside(workspace, file)) return "";
    try {
      return (await readResolvedFile(file, shown(file), guard)).data.toString("utf8");
    } catch (error) {
      if (isMissing(error)) return "";
      throw error;
    }
  }

  /** The lock file is made with a plain open: first make sure the directory is the workspace's own. */
  async function insideWorkspace(directory: string): Promise<void> {
    const [real, root] = await Promise.all([realpath(directory), realpath(workspace)]);
    if (real !== root && !real.startsWith(`${root}${path.sep}`)) {
      throw new ToolError(`the memory directory ${shown(directory)} is a link to outside the workspace`, "Remove the link; memory stays inside the workspace.");
    }
  }

  function locked<T>(sessionKey: string, operation: (file: string) => Promise<T>): Promise<T> {
    let file: string;
    try {
      file = fileOf(sessionKey);
    } catch (error) {
      return Promise.reject(error);
    }
    return queue.run(file, async () => {
      await mkdir(path.dirname(file), { recursive: true });
      await insideWorkspace(path.dirname(file));
      const release = await acquireLock(`${file}.lock`, staleLockMs);
      try {
        return await operation(file);
      } finally {
        await release();
      }
    });
  }

  async function save(sessionKey: string, file: string, content: string): Promise<void> {
    checkMemorySize(relativeOf(sessionKey), Buffer.byteLength(content, "utf8"), maxBytes);
    await writeResolvedFile(file, shown(file), content, guard);
  }

  const store: MemoryStore = {
    scope,
    location: relativeOf,

    read: (sessionKey) => readIfExists(fileOf(sessionKey)),

    write: (sessionKey, content) => locked(sessionKey, (file) => save(sessionKey, file, content)),

    append: (sessionKey, text) => locked(sessionKey, async (file) => save(sessionKey, file, withSection(await readIfExists(file), text, now()))),

    search: (sessionKey, query) =>
      searchMemory(store, (which) => readIfExists(which === "global" ? globalFile : fileOf(sessionKey)), sessionKey, query, "memory/MEMORY.md"),

    archive: (sessionKey) =>
      locked(sessionKey, async (file) => {
        const name = archiveNameOf(now());
        await renameInDirectory(file, name, guard).catch((error: unknown) => {
          if (!isMissing(error) && (error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
        });
        await writeResolvedFile(file, shown(file), `Older memory is in ${name} beside this one.\n`, guard);
        return relativeOf(sessionKey).replace(/MEMORY\.md$/, name);
      }),
  };
  return store;
}

/**
 * Whether `file` (inside `workspace`) does not exist, told by lstat, which answers a missing entry
 * with undefined instead of an error: each component from the workspace down is a real directory
 * until one is missing. A link on the way is not judged here (false): the wall refuses it.
 */
function missingInside(workspace: string, file: string): boolean {
  const components = path.relative(workspace, file).split(path.sep);
  let current = workspace;
  for (const [index, component] of components.entries()) {
    current = path.join(current, component);
    const info = lstatSync(current, { throwIfNoEntry: false });
    if (info === undefined) return true;
    if (info.isSymbolicLink() || (index < components.length - 1 && !info.isDirectory())) return false;
  }
  return false;
}

/** Takes `lockFile` (created exclusively); a lock older than `staleMs` is a crashed holder's and is taken over. */
async function acquireLock(lockFile: string, staleMs: number): Promise<() => Promise<void>> {
  const deadline = Date.now() + 5 * staleMs;
  for (;;) {
    try {
      const handle = await open(lockFile, "wx", 0o600);
      await handle.writeFile(`${process.pid}\n`);
      await handle.close();
      return () => rm(lockFile, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const info = await stat(lockFile).catch(() => undefined);
    if (info && Date.now() - info.mtimeMs > staleMs) {
      await rm(lockFile, { force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`${lockFile} is held by another process; remove it if no countbot process is running`);
    await sleep(10);
  }
}

/** `2025-06-01 14:03 UTC`: UTC so sections written from different hosts sort and compare. */
function formatDate(time: number): string {
  return `${new Date(time).toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

function formatSize(bytes: number): string {
  return bytes < 1024 ? `${bytes} bytes` : `${(bytes / 1024).toFixed(1).replace(/\.0$/, "")} KiB`;
}
