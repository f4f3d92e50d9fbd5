/**
 * Subagent tasks in the Redis store, shared by every worker, gateway and `countbot tasks` of a
 * deployment.
 *
 * Layout, under the deployment's hash tag:
 * - `{p}:task:<id>` HASH field → value as JSON text (`"running"`, `42`, `[...]`), one field per
 *   task field; JSON per field keeps types without re-encoding a whole task in Lua
 * - `{p}:tasks` ZSET id → createdAt: every task, for listing newest first
 * - `{p}:tasks:session:<sessionKey>` ZSET id → createdAt: the tasks of one session
 * - `{p}:tasks:status:<status>` ZSET id → createdAt: the tasks in one status, for lists and stats
 *
 * Writes are Lua scripts (./lua) that keep the task and its indexes in step: `update` checks the
 * status and writes in one step (the compare-and-set a cancelled task relies on), `delete` and
 * `cleanup` re-check what they were asked to check in the same step as the delete.
 */
import { FINISHED_STATUSES, SubagentTaskSchema, type SubagentTask, type TaskStats, type TaskStatus, TaskStatusSchema } from "./task-record.js";
import { hashTag, type RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import { type TaskFilter, type TaskPatch, validPatch, validTask } from "./file-tasks.js";
import type { TaskStore } from "./store.js";

export interface RedisTaskStoreOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
}

export interface RedisTaskKeys {
  task(id: string): string;
  /** ZSET id → createdAt of every task. */
  all: string;
  session(sessionKey: string): string;
  status(status: TaskStatus): string;
}

export function redisTaskKeys(prefix: string): RedisTaskKeys {
  const tag = hashTag(prefix);
  return {
    task: (id) => `${tag}:task:${id}`,
    all: `${tag}:tasks`,
    session: (sessionKey) => `${tag}:tasks:session:${sessionKey}`,
    status: (status) => `${tag}:tasks:status:${status}`,
  };
}

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  create: loadScript(scriptsDirectory, "create-task-4.lua"),
  update: loadScript(scriptsDirectory, "update-task-6.lua"),
  delete: loadScript(scriptsDirectory, "delete-task-8.lua"),
};

/** Tasks read per round trip while listing. */
const PAGE = 200;
/** A delete that finds the task moved to another session (deleted and re-created) tries again this often. */
const DELETE_ATTEMPTS = 3;

/** Field, JSON value, field, JSON value, ...: the fields that are set. */
function encodeFields(fields: Partial<SubagentTask>): string[] {
  return Object.entries(fields).flatMap(([field, value]) => (value === undefined ? [] : [field, JSON.stringify(value)]));
}

/** A task from HGETALL's reply (a flat list or a record); undefined when missing or unreadable. */
function decodeTask(reply: string[] | Record<string, string>): SubagentTask | undefined {
  const entries: Array<[string, string]> = [];
  if (Array.isArray(reply)) {
    for (let index = 0; index + 1 < reply.length; index += 2) entries.push([reply[index]!, reply[index + 1]!]);
  } else {
    entries.push(...Object.entries(reply));
  }
  if (entries.length === 0) return undefined;
  try {
    const parsed = SubagentTaskSchema.safeParse(Object.fromEntries(entries.map(([field, text]) => [field, JSON.parse(text) as unknown])));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined; // not ours: skipped rather than failing every listing
  }
}

/** `from` as the scripts take it: comma-separated, or `*` for any status. */
function allowedStatuses(from: readonly TaskStatus[] | undefined): string {
  return from === undefined ? "*" : from.join(",");
}

type TaskKeys = ReturnType<typeof redisTaskKeys>;

/**
 * Deletes one task under the script's conditions; true when it was deleted. The script is told the
 * session the task was read with, and refuses (-1) when it changed meanwhile: read again, a few times.
 */
async function removeTask(redis: RedisClient, keys: TaskKeys, statusKeys: string[], id: string, allowed: readonly TaskStatus[] | undefined, before: number | undefined): Promise<boolean> {
  for (let attempt = 0; attempt < DELETE_ATTEMPTS; attempt++) {
    const storedSession = await redis.hget(keys.task(id), "sessionKey");
    if (storedSession === null) return false;
    let sessionKey: unknown;
    try {
      sessionKey = JSON.parse(storedSession);
    } catch {
      sessionKey = undefined;
    }
    if (typeof sessionKey !== "string") throw new Error(`task ${id} in Redis has no readable sessionKey`);
    const keyList = [keys.task(id), keys.all, keys.session(sessionKey), ...statusKeys];
    const reply = (await runScript(redis, scripts.delete, keyList, [id, storedSession, allowedStatuses(allowed), before === undefined ? "" : before])) as number;
    if (reply !== -1) return reply === 1;
  }
  throw new Error(`task ${id} kept changing sessions while it was being deleted`);
}

/** Newest first, a page at a time from the narrowest index the filter names. */
async function listTasks(redis: RedisClient, keys: TaskKeys, filter: TaskFilter, readMany: (ids: string[]) => Promise<Array<SubagentTask | undefined>>): Promise<SubagentTask[]> {
  const index = filter.sessionKey !== undefined ? keys.session(filter.sessionKey) : filter.status !== undefined ? keys.status(filter.status) : keys.all;
  const limit = filter.limit ?? Number.POSITIVE_INFINITY;
  const found: SubagentTask[] = [];
  for (let start = 0; found.length < limit; start += PAGE) {
    // Newest first; equal scores come in descending id order, which the file store copies.
    const ids = await redis.zrevrange(index, start, start + PAGE - 1);
    for (const task of await readMany(ids)) {
      if (!task || found.length >= limit) continue;
      if (filter.status !== undefined && task.status !== filter.status) continue;
      if (filter.sessionKey !== undefined && task.sessionKey !== filter.sessionKey) continue;
      found.push(task);
    }
    if (ids.length < PAGE) break;
  }
  return found;
}

/** The index sizes, counted in one MULTI so the numbers belong to one moment. */
async function countTasks(redis: RedisClient, keys: TaskKeys): Promise<TaskStats> {
  const replies = await redis
    .multi()
    .zcard(keys.all)
    .zcard(keys.status("pending"))
    .zcard(keys.status("running"))
    .zcard(keys.status("completed"))
    .zcard(keys.status("failed"))
    .zcard(keys.status("cancelled"))
    .exec();
  const [total, pending, running, completed, failed, cancelled] = (replies ?? []).map(([error, count]) => {
    if (error) throw error;
    return Number(count);
  });
  return { total: total ?? 0, pending: pending ?? 0, running: running ?? 0, completed: completed ?? 0, failed: failed ?? 0, cancelled: cancelled ?? 0 };
}

export function createRedisTaskStore(options: RedisTaskStoreOptions): TaskStore & { close(): Promise<void> } {
  const { redis } = options;
  const keys = redisTaskKeys(options.prefix);
  const statusKeys = TaskStatusSchema.options.map((status) => keys.status(status));
  let closed = false;

  function assertOpen(): void {
    if (closed) throw new Error("the redis store is closed");
  }

  function checkId(id: string): void {
    if (id.length === 0) throw new Error("a task id must not be empty");
  }

  async function readMany(ids: string[]): Promise<Array<SubagentTask | undefined>> {
    // Sent together without awaiting each: ioredis pipelines them on the one connection.
    const replies = await Promise.all(ids.map((id) => redis.hgetall(keys.task(id))));
    return replies.map((reply, index) => {
      const task = decodeTask(reply);
      return task?.id === ids[index] ? task : undefined;
    });
  }

  /** Deletes one task under the script's conditions; true when it was deleted. */
  const remove = (id: string, allowed: readonly TaskStatus[] | undefined, before: number | undefined) => removeTask(redis, keys, statusKeys, id, allowed, before);

  return {
    async create(input) {
      assertOpen();
      const task = validTask(input);
      checkId(task.id);
      const keyList = [keys.task(task.id), keys.all, keys.session(task.sessionKey), keys.status(task.status)];
      const created = (await runScript(redis, scripts.create, keyList, [task.id, task.createdAt, ...encodeFields(task)])) as number;
      if (created !== 1) throw new Error(`task ${task.id} exists already`);
    },

    async get(id) {
      assertOpen();
      if (id.length === 0) return undefined;
      const [task] = await readMany([id]);
      return task;
    },

    async update(id, patch: TaskPatch, from) {
      assertOpen();
      checkId(id);
      const changes = validPatch(patch);
      const reply = (await runScript(redis, scripts.update, [keys.task(id), ...statusKeys], [id, allowedStatuses(from), ...encodeFields(changes)])) as
        | string[]
        | null;
      if (reply === null) return undefined;
      const task = decodeTask(reply);
      if (!task) throw new Error(`task ${id} in Redis is unreadable after an update`);
      return task;
    },

    async list(filter: TaskFilter = {}) {
      assertOpen();
      return listTasks(redis, keys, filter, readMany);
    },

    async delete(id) {
      assertOpen();
      if (id.length === 0) return false;
      return remove(id, undefined, undefined);
    },

    async stats() {
      assertOpen();
      return countTasks(redis, keys);
    },

    async cleanup(before) {
      assertOpen();
      const finished = [...FINISHED_STATUSES];
      let removed = 0;
      for (const status of finished) {
        // A task finishes after it is created, so only those created before `before` can qualify;
        // the script checks the completion time itself.
        const ids = await redis.zrangebyscore(keys.status(status), "-inf", `(${before}`);
        for (const id of ids) {
          if (await remove(id, finished, before)) removed += 1;
        }
      }
      return removed;
    },

    async close() {
      closed = true;
    },
  };
}
