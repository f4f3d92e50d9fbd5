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
  NodePatchSchema,
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

export function createFileRunStore(options: FileRunStoreOptions): WorkflowRunStore & { close(): Promise<void> } {
  const { directory } = options;
  const queue = createKeyedQueue();
  let closed = false;
  // Written by this store's writes at once; the scan fills in only what they have not touched.
  const summaries = new Map<string, RunSummary>();
  const removed = new Set<string>();
  let scanned: Promise<void> | undefined;
  const fileOf = (id: string) => path.join(directory, `${safeFileName(id)}${SUFFIX}`);

  function serialized<T>(id: string, operation: () => Promise<T>): Promise<T> {
    if (closed) return Promise.reject(new Error("the file store is closed"));
    try {
      return queue.run(safeFileName(id), operation);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async function read(id: string): Promise<WorkflowRun | undefined> {
    const text = await readFile(fileOf(id), "utf8").catch((error: unknown) => (isMissing(error) ? undefined : Promise.reject(error)));
    const run = text === undefined ? undefined : parseRun(text);
    return run?.id === id ? run : undefined;
  }

  async function write(run: WorkflowRun): Promise<WorkflowRun> {
    const checked = validRecord(WorkflowRunSchema, run, "workflow run");
    await mkdir(directory, { recursive: true });
    await writeFileAtomic(fileOf(checked.id), `${JSON.stringify(checked)}\n`);
    summaries.set(checked.id, summaryOf(checked));
    removed.delete(checked.id);
    return checked;
  }

  async function remove(id: string): Promise<boolean> {
    try {
      await rm(fileOf(id));
      summaries.delete(id);
      removed.add(id);
      return true;
    } catch (error) {
      if (isMissing(error)) return false;
      throw error;
    }
  }

  function scan(): Promise<void> {
    scanned ??= readAll().then((runs) => {
      for (const run of runs) if (!summaries.has(run.id) && !removed.has(run.id)) summaries.set(run.id, summaryOf(run));
    });
    return scanned;
  }

  async function readAll(): Promise<WorkflowRun[]> {
    if (closed) throw new Error("the file store is closed");
    const names = await readdir(directory).catch((error: unknown) => (isMissing(error) ? [] : Promise.reject(error)));
    const runs: WorkflowRun[] = [];
    for (const name of names.filter((candidate) => candidate.endsWith(SUFFIX))) {
      const text = await readFile(path.join(directory, name), "utf8").catch((error: unknown) => (isMissing(error) ? undefined : Promise.reject(error)));
      const run = text === undefined ? undefined : parseRun(text);
      if (run && `${safeFileName(run.id)}${SUFFIX}` === name) runs.push(run);
    }
    return runs;
  }

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
      if (closed) throw new Error("the file store is closed");
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
        if (!current) return undefined;
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
        return write({ ...current, nodes });
      });
    },

    delete(id) {
      return serialized(id, () => remove(id));
    },

    async cleanup(before) {
      if (closed) throw new Error("the file store is closed");
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
      closed = true;
      await queue.drain();
    },
  };
}
