/**
 * Workflow runs in the file store: one JSON file per run, `<dataDir>/workflow-runs/<safeFileName(id)>.json`,
 * nodes included, replaced atomically on every write. Every operation on one run goes through an
 * in-memory queue, so `updateNode`'s checks and its write are one step (one process owns a data dir).
 *
 * `list` reads only the runs it returns: an index of every run's session, team, status and creation
 * time is built from the files on the first list and kept up to date by this store's own writes
 * (one process owns the data dir; a reader in another process, `countbot runs list`, builds its own).
 */
import { mkdir, readFile, readdir, rm } from "node:fs/promises";
import path from "node:path";
import { createKeyedQueue, safeFileName, writeFileAtomic } from "./file-io.js";
import type { WorkflowRunStore } from "./store.js";
import {
  ACTIVE_NODE_STATUSES,
  FINISHED_RUN_STATUSES,
  type NodePatch,
  NodePatchSchema,
  type NodeUpdateOptions,
  RunPatchSchema,
  type WorkflowRun,
  WorkflowRunSchema,
  matchesRunFilter,
  newestRunFirst,
  runEndedAt,
  validRecord,
} from "./team-record.js";

export interface FileRunStoreOptions {
  /** `<dataDir>/workflow-runs`. */
  directory: string;
}

const SUFFIX = ".json";

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT";
}

function parseRun(text: string): WorkflowRun | undefined {
  try {
    const parsed = WorkflowRunSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined; // torn or foreign: skipped
  }
}

type RunSummary = Pick<WorkflowRun, "id" | "sessionKey" | "teamId" | "status" | "createdAt" | "completedAt">;

const summaryOf = (run: WorkflowRun): RunSummary => ({
  id: run.id,
  sessionKey: run.sessionKey,
  teamId: run.teamId,
  status: run.status,
  createdAt: run.createdAt,
  completedAt: run.completedAt,
});

const endedBefore = (run: RunSummary, before: number) => FINISHED_RUN_STATUSES.has(run.status) && runEndedAt(run) < before;

/**
 * The run files of one directory, one JSON file per run named after its id, and a summary of each
 * run (its filter fields) kept in memory so listings do not read every file. Each id's reads and
 * writes run one at a time in its queue; writes are atomic.
 */
class RunDirectory {
  private readonly queue = createKeyedQueue();
  closed = false;
  // Written by this store's writes at once; the scan fills in only what they have not touched.
  readonly summaries = new Map<string, RunSummary>();
  private readonly removed = new Set<string>();
  private scanned: Promise<void> | undefined;

  constructor(private readonly directory: string) {}

  /** Runs `operation` in the id's queue; refused once closed. */
  serialized<T>(id: string, operation: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error("the file store is closed"));
    try {
      return this.queue.run(safeFileName(id), operation);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async read(id: string): Promise<WorkflowRun | undefined> {
    const text = await readFile(this.fileOf(id), "utf8").catch((error: unknown) => (isMissing(error) ? undefined : Promise.reject(error)));
    const run = text === undefined ? undefined : parseRun(text);
    return run?.id === id ? run : undefined;
  }

  async write(run: WorkflowRun): Promise<WorkflowRun> {
    const checked = validRecord(WorkflowRunSchema, run, "workflow run");
    await mkdir(this.directory, { recursive: true });
    await writeFileAtomic(this.fileOf(checked.id), `${JSON.stringify(checked)}\n`);
    this.summaries.set(checked.id, summaryOf(checked));
    this.removed.delete(checked.id);
    return checked;
  }

  async remove(id: string): Promise<boolean> {
    try {
      await rm(this.fileOf(id));
      this.summaries.delete(id);
      this.removed.add(id);
      return true;
    } catch (error) {
      if (isMissing(error)) return false;
      throw error;
    }
  }

  /** Fills the summaries from the directory once (refused once closed). */
  scan(): Promise<void> {
    if (this.closed) return Promise.reject(new Error("the file store is closed"));
    this.scanned ??= this.readAll().then((runs) => {
      for (const run of runs) if (!this.summaries.has(run.id) && !this.removed.has(run.id)) this.summaries.set(run.id, summaryOf(run));
    });
    return this.scanned;
  }

  drain(): Promise<void> {
    return this.queue.drain();
  }

  private async readAll(): Promise<WorkflowRun[]> {
    const names = await readdir(this.directory).catch((error: unknown) => (isMissing(error) ? [] : Promise.reject(error)));
    const runs: WorkflowRun[] = [];
    for (const name of names.filter((candidate) => candidate.endsWith(SUFFIX))) {
      const text = await readFile(path.join(this.directory, name), "utf8").catch((error: unknown) => (isMissing(error) ? undefined : Promise.reject(error)));
      const run = text === undefined ? undefined : parseRun(text);
      if (run && `${safeFileName(run.id)}${SUFFIX}` === name) runs.push(run);
    }
    return runs;
  }

  private fileOf(id: string): string {
    return path.join(this.directory, `${safeFileName(id)}${SUFFIX}`);
  }
}

/** The run with one node changed, or undefined when the run's or the node's status, or the active cap, forbids it. */
function withNodeUpdate(current: WorkflowRun, nodeId: string, changes: NodePatch, updateOptions: NodeUpdateOptions): WorkflowRun | undefined {
  if (updateOptions.runFrom !== undefined && !updateOptions.runFrom.includes(current.status)) return undefined;
  const index = current.nodes.findIndex((node) => node.id === nodeId);
  const node = current.nodes[index];
  if (!node || (updateOptions.from !== undefined && !updateOptions.from.includes(node.status))) return undefined;
  if (updateOptions.maxActive !== undefined) {
    const active = current.nodes.filter((other) => other.id !== nodeId && ACTIVE_NODE_STATUSES.has(other.status)).length;
    if (active >= updateOptions.maxActive) return undefined;
  }
  const nodes = [...current.nodes];
  nodes[index] = { ...node, ...changes };
  return { ...current, nodes };
}

export function createFileRunStore(options: FileRunStoreOptions): WorkflowRunStore & { close(): Promise<void> } {
  const files = new RunDirectory(options.directory);
  const { summaries } = files;
  const serialized = <T>(id: string, operation: () => Promise<T>) => files.serialized(id, operation);
  const read = (id: string) => files.read(id);
  const write = (run: WorkflowRun) => files.write(run);
  const remove = (id: string) => files.remove(id);
  const scan = () => files.scan();
  const assertOpen = () => {
    if (files.closed) throw new Error("the file store is closed");
  };

  return {
    create(run) {
      return serialized(run.id, async () => {
        const checked = validRecord(WorkflowRunSchema, run, "workflow run");
        if (new Set(checked.nodes.map((node) => node.id)).size !== checked.nodes.length) throw new Error(`invalid workflow run: node ids repeat`);
        if (await read(checked.id)) throw new Error(`workflow run ${checked.id} exists already`);
        await write(checked);
      });
    },

    get: (id) => serialized(id, () => read(id)),

    async list(filter = {}) {
      assertOpen();
      await scan();
      const candidates = [...summaries.values()].filter((summary) => matchesRunFilter(summary, filter)).sort(newestRunFirst);
      const found: WorkflowRun[] = [];
      for (const candidate of candidates) {
        if (filter.limit !== undefined && found.length >= filter.limit) break;
        const run = await serialized(candidate.id, () => read(candidate.id));
        if (run && matchesRunFilter(run, filter)) found.push(run);
      }
      return found;
    },

    updateRun(id, patch, from) {
      return serialized(id, async () => {
        const changes = validRecord(RunPatchSchema, patch, "workflow run update");
        const current = await read(id);
        if (!current || (from !== undefined && !from.includes(current.status))) return undefined;
        return write({ ...current, ...changes });
      });
    },

    updateNode(id, nodeId, patch, updateOptions = {}) {
      return serialized(id, async () => {
        const changes = validRecord(NodePatchSchema, patch, "workflow node update");
        const current = await read(id);
        const updated = current && withNodeUpdate(current, nodeId, changes, updateOptions);
        return updated && write(updated);
      });
    },

    delete(id) {
      return serialized(id, () => remove(id));
    },

    async cleanup(before) {
      assertOpen();
      await scan();
      let deleted = 0;
      for (const candidate of [...summaries.values()].filter((summary) => endedBefore(summary, before))) {
        // Checked again in the run's queue against the file itself, which a write may have changed since.
        const gone = await serialized(candidate.id, async () => {
          const run = await read(candidate.id);
          return run !== undefined && endedBefore(run, before) && (await remove(run.id));
        });
        if (gone) deleted += 1;
      }
      return deleted;
    },

    async close() {
      files.closed = true;
      await files.drain();
    },
  };
}
