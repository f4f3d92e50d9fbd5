/**
 * Long-term memory: Markdown files in the workspace that the agent reads into its prompt and edits
 * with the memory tool. Plain files, so the user can read and fix them too.
 *
 * - global scope: every session shares `<workspace>/memory/MEMORY.md`.
 * - chat scope: each session has `<workspace>/memory/chats/<safe name>/MEMORY.md`; search also
 *   looks in the global file, which the operator can keep for facts every chat should know.
 *
 * The files live in the workspace, where exec can replace them with links, so every access goes
 * through the file tools' own layer (../tools/workspace-files.ts): a MEMORY.md or a chat directory
 * turned into a symlink out of the workspace is refused, never read into a prompt or written through.
 */
import path from "node:path";
import { ToolError } from "../errors.js";
import { createKeyedQueue, safeFileName } from "../store/file-io.js";
import { isMissing, readResolvedFile, renameInDirectory, writeResolvedFile, type WorkspaceGuard } from "../tools/workspace-files.js";

export type MemoryScope = "chat" | "global";

export interface MemoryStoreOptions {
  /** Workspace root; memory lives under `<workspace>/memory`. */
  workspace: string;
  scope: MemoryScope;
  /** Largest memory file in bytes (UTF-8); a write that would exceed it is refused. Default 64 KiB. */
  maxBytes?: number;
  /** Clock in ms since epoch, for the date of appended sections. */
  now?: () => number;
}

/** One line that matched a search. */
export interface MemoryMatch {
  /** The memory file, relative to the workspace, with `/` separators. */
  file: string;
  /** 1-based line number. */
  line: number;
  text: string;
}

export interface MemoryStore {
  readonly scope: MemoryScope;
  /** Absolute path of the memory file the session reads and writes. */
  path(sessionKey: string): string;
  /** The session's memory; empty when there is none yet. */
  read(sessionKey: string): Promise<string>;
  /** Replaces the session's memory. Throws ToolError when over the size cap. */
  write(sessionKey: string, content: string): Promise<void>;
  /** Moves the session's memory file aside under `newName` (same directory); the next read is empty. */
  archive(sessionKey: string, newName: string): Promise<void>;
  /** Adds `text` as a new section headed with the current date and time (UTC). */
  append(sessionKey: string, text: string): Promise<void>;
  /**
   * Lines containing `query`, ignoring case: the session's file first, then (chat scope) the
   * global file. An empty query matches nothing.
   */
  search(sessionKey: string, query: string): Promise<MemoryMatch[]>;
}

export const DEFAULT_MEMORY_MAX_BYTES = 64 * 1024;

export function createMemoryStore(options: MemoryStoreOptions): MemoryStore {
  const { workspace, scope } = options;
  const maxBytes = options.maxBytes ?? DEFAULT_MEMORY_MAX_BYTES;
  const now = options.now ?? Date.now;
  const memoryDir = path.join(workspace, "memory");
  const globalFile = path.join(memoryDir, "MEMORY.md");
  // Append is read-modify-write: two in flight for one file would lose one of them.
  const queue = createKeyedQueue();
  // Memory is always inside the workspace, whatever tools.restrictToWorkspace says.
  const guard: WorkspaceGuard = { workspace, restrictToWorkspace: true };

  const fileOf = (sessionKey: string) =>
    scope === "global" ? globalFile : path.join(memoryDir, "chats", safeFileName(sessionKey), "MEMORY.md");

  const display = (file: string) => path.relative(workspace, file).split(path.sep).join("/");

  async function readIfExists(file: string): Promise<string> {
    try {
      return (await readResolvedFile(file, display(file), guard)).data.toString("utf8");
    } catch (error) {
      if (isMissing(error)) return "";
      throw error;
    }
  }

  async function save(file: string, content: string): Promise<void> {
    const bytes = Buffer.byteLength(content, "utf8");
    if (bytes > maxBytes) {
      throw new ToolError(
        `the memory file ${display(file)} would be ${formatSize(bytes)}, over its ${formatSize(maxBytes)} limit, so nothing was saved`,
        'Condense it: read the memory, then use action "write" with a shorter version that keeps only lasting facts.',
      );
    }
    await writeResolvedFile(file, display(file), content, guard);
  }

  return {
    scope,
    path: fileOf,

    read: (sessionKey) => readIfExists(fileOf(sessionKey)),

    write(sessionKey, content) {
      const file = fileOf(sessionKey);
      return queue.run(file, () => save(file, content));
    },

    archive(sessionKey, newName) {
      const file = fileOf(sessionKey);
      return queue.run(file, () => renameInDirectory(file, newName, guard));
    },

    append(sessionKey, text) {
      const file = fileOf(sessionKey);
      return queue.run(file, async () => {
        const current = await readIfExists(file);
        const section = `## ${formatDate(now())}\n\n${text.trim()}\n`;
        const separator = current.trim() === "" ? "" : current.endsWith("\n") ? "\n" : "\n\n";
        await save(file, current.trim() === "" ? section : `${current}${separator}${section}`);
      });
    },

    async search(sessionKey, query) {
      const needle = query.trim().toLowerCase();
      if (needle === "") return [];
      const files = [fileOf(sessionKey)];
      if (scope === "chat") files.push(globalFile);
      const matches: MemoryMatch[] = [];
      for (const file of files) {
        const lines = (await readIfExists(file)).split(/\r?\n/);
        lines.forEach((text, index) => {
          if (text.toLowerCase().includes(needle)) matches.push({ file: display(file), line: index + 1, text });
        });
      }
      return matches;
    },
  };
}

/** `2025-06-01 14:03 UTC`: UTC so sections written from different hosts sort and compare. */
function formatDate(time: number): string {
  return `${new Date(time).toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

function formatSize(bytes: number): string {
  return bytes < 1024 ? `${bytes} bytes` : `${(bytes / 1024).toFixed(1).replace(/\.0$/, "")} KiB`;
}
