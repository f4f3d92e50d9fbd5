/**
 * Subagent tasks in the file store: one JSON file per task, `<dataDir>/tasks/<safeFileName(id)>.json`,
 * replaced atomically (temp file + rename) on every write, so a reader (`countbot tasks list` in
 * another process, say) sees a task before or after a write, never half of one.
 *
 * One process owns a data dir: `update`'s compare-and-set holds because every operation on one task
 * runs through an in-memory queue, not because of file locks. A second process writing the same
 * task could slip in between the read and the write.
 *
 * Also here, and shared with the Redis store: the checks both stores make on the way in and the
 * order both lists keep, so the two behave alike.
 */
import { mkdir, readFile, readdir, rm } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { FINISHED_STATUSES, SubagentTaskSchema, type SubagentTask, type TaskStats, type TaskStatus } from "./task-record.js";
import { createKeyedQueue, safeFileName, writeFileAtomic } from "./file-io.js";
import type { TaskStore } from "./store.js";

export interface FileTaskStoreOptions {
  /** Where the task files live: `<dataDir>/tasks`. */
  directory: string;
}

export interface FileTaskStore extends TaskStore {
  /** Refuses new work and waits for queued writes. */
  close(): Promise<void>;
}

export type TaskPatch = Partial<Omit<SubagentTask, "id">>;
export type TaskFilter = NonNullable<Parameters<TaskStore["list"]>[0]>;

const TASK_SUFFIX = ".json";
const PatchSchema = SubagentTaskSchema.omit({ id: true }).partial().strict();

/** The task, checked: one the store could not read back fails now rather than vanishing later. */
export function validTask(task: SubagentTask): SubagentTask {
  const parsed = SubagentTaskSchema.safeParse(task);
  if (!parsed.success) throw new Error(`invalid task: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/**
 * The patch without its undefined fields (undefined means "leave as it is" in both stores), checked.
 * `sessionKey` and `createdAt` are fixed at creation: the indexes are keyed by them.
 */
export function validPatch(patch: TaskPatch): TaskPatch {
  const defined = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined)) as TaskPatch;
  if ("sessionKey" in defined || "createdAt" in defined) throw new Error("the sessionKey and createdAt of a task cannot change");
  const parsed = PatchSchema.safeParse(defined);
  if (!parsed.success) throw new Error(`invalid task update: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** Newest first; ties by id, descending (the order of a Redis ZREVRANGE). */
export function newestFirst(left: SubagentTask, right: SubagentTask): number {
  return right.createdAt - left.createdAt || (left.id < right.id ? 1 : left.id > right.id ? -1 : 0);
}

export function matchesFilter(task: SubagentTask, filter: TaskFilter): boolean {
  return (filter.status === undefined || task.status === filter.status) && (filter.sessionKey === undefined || task.sessionKey === filter.sessionKey);
}

export function countStatuses(statuses: Iterable<TaskStatus>): TaskStats {
  const stats: TaskStats = { total: 0, pending: 0, running: 0, completed: 0, failed: 0, cancelled: 0 };
  for (const status of statuses) {
    stats.total += 1;
    stats[status] += 1;
  }
  return stats;
}

/** When a finished task counts as finished for `cleanup`: its completion, or its creation if that was never stamped. */
export function finishedAt(task: SubagentTask): number {
  return task.completedAt ?? task.createdAt;
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT";
}

function parseTask(text: string): SubagentTask | undefined {
  try {
    const parsed = SubagentTaskSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined; // torn or foreign: skipped, like a corrupt session line
  }
}

/**
 * The task files of one directory, one JSON file per task named after its id: each id's reads and
 * writes run one at a time in its queue, writes are atomic, and a file that is torn, foreign or
 * names another task is not a task.
 */
class TaskDirectory {
  private readonly queue = createKeyedQueue();
  closed = false;

  constructor(private readonly directory: string) {}

  /** Runs `operation` in the id's queue; refused once closed. */
  serialized<T>(id: string, operation: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error("the file store is closed"));
    try {
      return this.queue.run(safeFileName(id), operation);
    } catch (error) {
      return Promise.reject(error); // an empty id
    }
  }

  async read(id: string): Promise<SubagentTask | undefined> {
    const text = await readFile(this.fileOf(id), "utf8").catch((error: unknown) => (isMissing(error) ? undefined : Promise.reject(error)));
    const task = text === undefined ? undefined : parseTask(text);
    // A file is named after its id; one whose content names another task is not this one.
    return task?.id === id ? task : undefined;
  }

  async write(task: SubagentTask): Promise<void> {
    await mkdir(this.directory, { recursive: true });
    await writeFileAtomic(this.fileOf(task.id), `${JSON.stringify(task)}\n`);
  }

  async readAll(): Promise<SubagentTask[]> {
    if (this.closed) throw new Error("the file store is closed");
    const names = await readdir(this.directory).catch((error: unknown) => (isMissing(error) ? [] : Promise.reject(error)));
    const tasks: SubagentTask[] = [];
    for (const name of names.filter((candidate) => candidate.endsWith(TASK_SUFFIX))) {
      const text = await readFile(path.join(this.directory, name), "utf8").catch((error: unknown) => (isMissing(error) ? undefined : Promise.reject(error)));
      const task = text === undefined ? undefined : parseTask(text);
      if (task && `${safeFileName(task.id)}${TASK_SUFFIX}` === name) tasks.push(task);
    }
    return tasks;
  }

  /** Deletes the id's file; false when there was none. */
  async remove(id: string): Promise<boolean> {
    try {
      await rm(this.fileOf(id));
      return true;
    } catch (error) {
      if (isMissing(error)) return false;
      throw error;
    }
  }

  /** Waits for every queued operation. */
  drain(): Promise<void> {
    return this.queue.drain();
  }

  private fileOf(id: string): string {
    return path.join(this.directory, `${safeFileName(id)}${TASK_SUFFIX}`);
  }
}

export function createFileTaskStore(options: FileTaskStoreOptions): FileTaskStore {
  const files = new TaskDirectory(options.directory);
  const serialized = <T>(id: string, operation: () => Promise<T>) => files.serialized(id, operation);
  const read = (id: string) => files.read(id);
  const write = (task: SubagentTask) => files.write(task);
  const readAll = () => files.readAll();
  const remove = (id: string) => files.remove(id);

  return {
    create(task) {
      return serialized(task.id, async () => {
        const checked = validTask(task);
        if (await read(checked.id)) throw new Error(`task ${checked.id} exists already`);
        await write(checked);
      });
    },

    get(id) {
      return serialized(id, () => read(id));
    },

    update(id, patch, from) {
      return serialized(id, async () => {
        const changes = validPatch(patch);
        const current = await read(id);
        if (!current || (from !== undefined && !from.includes(current.status))) return undefined;
        const updated = validTask({ ...current, ...changes });
        await write(updated);
        return updated;
      });
    },

    async list(filter = {}) {
      const tasks = (await readAll()).filter((task) => matchesFilter(task, filter)).sort(newestFirst);
      return filter.limit === undefined ? tasks : tasks.slice(0, Math.max(0, filter.limit));
    },

    delete(id) {
      return serialized(id, () => remove(id));
    },

    async stats() {
      return countStatuses((await readAll()).map((task) => task.status));
    },

    async cleanup(before) {
      const candidates = (await readAll()).filter((task) => FINISHED_STATUSES.has(task.status) && finishedAt(task) < before);
      let removed = 0;
      for (const candidate of candidates) {
        // Checked again in the task's queue: it may have been deleted or rewritten since the listing.
        const deleted = await serialized(candidate.id, async () => {
          const task = await read(candidate.id);
          return task !== undefined && FINISHED_STATUSES.has(task.status) && finishedAt(task) < before && (await remove(task.id));
        });
        if (deleted) removed += 1;
      }
      return removed;
    },

    async close() {
      files.closed = true;
      await files.drain();
    },
  };
}
