/**
 * Workflow runs in the Redis store, shared by every worker that runs their nodes.
 *
 * Layout, under the deployment's hash tag:
 * - `{p}:wfrun:<id>` HASH field → value as JSON text: the run's own fields, `nodeIds` (the node
 *   ids in order) and `node:<nodeId>:<field>` for every field of every node, so a node's update is
 *   a few HSETs of one key, checked and written in one script
 * - `{p}:wfruns` ZSET id → createdAt; `{p}:wfruns:session:<sessionKey>`, `{p}:wfruns:team:<teamId>`
 *   and `{p}:wfruns:status:<status>`: the same for one session, team or status
 *
 * Writes are Lua scripts (./lua): `updateNode` checks the node's status, the run's status and the
 * run's concurrency cap and writes in one step; `updateRun` moves the run between status indexes.
 */
import { hashTag, type RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import type { WorkflowRunStore } from "./store.js";
import {
  FINISHED_RUN_STATUSES,
  type NodeState,
  NodePatchSchema,
  type RunFilter,
  RunPatchSchema,
  type RunStatus,
  RunStatusSchema,
  type WorkflowRun,
  WorkflowRunSchema,
  matchesRunFilter,
  runEndedAt,
  validRecord,
} from "./team-record.js";

export interface RedisRunStoreOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
}

export function redisRunKeys(prefix: string) {
  const tag = hashTag(prefix);
  return {
    run: (id: string) => `${tag}:wfrun:${id}`,
    all: `${tag}:wfruns`,
    session: (sessionKey: string) => `${tag}:wfruns:session:${sessionKey}`,
    team: (teamId: string) => `${tag}:wfruns:team:${teamId}`,
    status: (status: RunStatus) => `${tag}:wfruns:status:${status}`,
  };
}

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  create: loadScript(scriptsDirectory, "create-run-5.lua"),
  updateRun: loadScript(scriptsDirectory, "update-run-6.lua"),
  updateNode: loadScript(scriptsDirectory, "update-node-1.lua"),
  delete: loadScript(scriptsDirectory, "delete-run-9.lua"),
};

const NODE_PREFIX = "node:";
const PAGE = 100;

function encodeFields(fields: Record<string, unknown>, prefix = ""): string[] {
  return Object.entries(fields).flatMap(([field, value]) => (value === undefined ? [] : [`${prefix}${field}`, JSON.stringify(value)]));
}

/** A run from HGETALL's reply; undefined when missing or unreadable. */
function decodeRun(reply: Record<string, string>): WorkflowRun | undefined {
  if (Object.keys(reply).length === 0) return undefined;
  try {
    const fields: Record<string, unknown> = {};
    const nodes = new Map<string, Record<string, unknown>>();
    for (const [field, text] of Object.entries(reply)) {
      const value: unknown = JSON.parse(text);
      if (!field.startsWith(NODE_PREFIX)) {
        fields[field] = value;
        continue;
      }
      const separator = field.lastIndexOf(":");
      const nodeId = field.slice(NODE_PREFIX.length, separator);
      const node = nodes.get(nodeId) ?? {};
      node[field.slice(separator + 1)] = value;
      nodes.set(nodeId, node);
    }
    const { nodeIds, ...run } = fields;
    if (!Array.isArray(nodeIds)) return undefined;
    const parsed = WorkflowRunSchema.safeParse({ ...run, nodes: nodeIds.map((id) => nodes.get(String(id))) });
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined; // not ours: skipped rather than failing every listing
  }
}

function allowed(statuses: readonly string[] | undefined): string {
  return statuses === undefined ? "*" : statuses.join(",");
}

type RunKeys = ReturnType<typeof redisRunKeys>;

/** Writes a new run (its fields and each node's, in one hash) and indexes it; refuses an id that exists. */
async function createRun(redis: RedisClient, keys: RunKeys, input: WorkflowRun): Promise<void> {
  const run = validRecord(WorkflowRunSchema, input, "workflow run");
  const nodeIds = run.nodes.map((node) => node.id);
  if (new Set(nodeIds).size !== nodeIds.length) throw new Error("invalid workflow run: node ids repeat");
  const { nodes, ...fields } = run;
  const values = [...encodeFields({ ...fields, nodeIds }), ...nodes.flatMap((node: NodeState) => encodeFields(node, `${NODE_PREFIX}${node.id}:`))];
  const keyList = [keys.run(run.id), keys.all, keys.session(run.sessionKey), keys.team(run.teamId), keys.status(run.status)];
  const created = (await runScript(redis, scripts.create, keyList, [run.id, run.createdAt, ...values])) as number;
  if (created !== 1) throw new Error(`workflow run ${run.id} exists already`);
}

/** Newest first, read a page at a time from the narrowest index the filter names. */
async function listRuns(redis: RedisClient, keys: RunKeys, filter: RunFilter, readMany: (ids: string[]) => Promise<Array<WorkflowRun | undefined>>): Promise<WorkflowRun[]> {
  const index =
    filter.sessionKey !== undefined ? keys.session(filter.sessionKey) : filter.teamId !== undefined ? keys.team(filter.teamId) : filter.status !== undefined ? keys.status(filter.status) : keys.all;
  const limit = filter.limit ?? Number.POSITIVE_INFINITY;
  const found: WorkflowRun[] = [];
  for (let start = 0; found.length < limit; start += PAGE) {
    const ids = await redis.zrevrange(index, start, start + PAGE - 1);
    for (const run of await readMany(ids)) {
      if (run && found.length < limit && matchesRunFilter(run, filter)) found.push(run);
    }
    if (ids.length < PAGE) break;
  }
  return found;
}

/** Deletes the finished runs that ended before `before`; how many went. */
async function cleanupRuns(redis: RedisClient, keys: RunKeys, before: number, remove: (id: string, sessionKey: string, teamId: string) => Promise<boolean>): Promise<number> {
  let deleted = 0;
  for (const status of FINISHED_RUN_STATUSES) {
    // A run ends after it is created, so only those created before `before` can qualify (the
    // index's score); each is read again for its end. A finished run never changes status.
    const ids = await redis.zrangebyscore(keys.status(status), "-inf", `(${before}`);
    for (const id of ids) {
      const fields = await redis.hmget(keys.run(id), "status", "createdAt", "completedAt", "sessionKey", "teamId");
      const [runStatus, createdAt, completedAt, sessionKey, teamId] = fields.map((text) => (text == null ? undefined : (JSON.parse(text) as unknown)));
      if (!FINISHED_RUN_STATUSES.has(runStatus as RunStatus) || typeof createdAt !== "number") continue;
      if (runEndedAt({ createdAt, completedAt: typeof completedAt === "number" ? completedAt : undefined }) >= before) continue;
      if (await remove(id, String(sessionKey), String(teamId))) deleted += 1;
    }
  }
  return deleted;
}

export function createRedisRunStore(options: RedisRunStoreOptions): WorkflowRunStore & { close(): Promise<void> } {
  const { redis } = options;
  const keys = redisRunKeys(options.prefix);
  const statusKeys = RunStatusSchema.options.map((status) => keys.status(status));
  let closed = false;

  function assertOpen(): void {
    if (closed) throw new Error("the redis store is closed");
  }

  async function readMany(ids: string[]): Promise<Array<WorkflowRun | undefined>> {
    const replies = await Promise.all(ids.map((id) => redis.hgetall(keys.run(id))));
    return replies.map((reply, index) => {
      const run = decodeRun(reply);
      return run?.id === ids[index] ? run : undefined;
    });
  }

  async function remove(id: string, sessionKey: string, teamId: string): Promise<boolean> {
    const keyList = [keys.run(id), keys.all, keys.session(sessionKey), keys.team(teamId), ...statusKeys];
    return ((await runScript(redis, scripts.delete, keyList, [id])) as number) === 1;
  }

  async function read(id: string): Promise<WorkflowRun | undefined> {
    if (id === "") return undefined;
    const [run] = await readMany([id]);
    return run;
  }

  return {
    async create(input) {
      assertOpen();
      await createRun(redis, keys, input);
    },

    async get(id) {
      assertOpen();
      return read(id);
    },

    async list(filter = {}) {
      assertOpen();
      return listRuns(redis, keys, filter, readMany);
    },

    async updateRun(id, patch, from) {
      assertOpen();
      const changes = validRecord(RunPatchSchema, patch, "workflow run update");
      const updated = (await runScript(redis, scripts.updateRun, [keys.run(id), ...statusKeys], [id, allowed(from), ...encodeFields(changes)])) as number;
      return updated === 1 ? read(id) : undefined;
    },

    async updateNode(id, nodeId, patch, updateOptions = {}) {
      assertOpen();
      const changes = validRecord(NodePatchSchema, patch, "workflow node update");
      const cap = updateOptions.maxActive === undefined ? "" : updateOptions.maxActive;
      const args = [nodeId, allowed(updateOptions.from), allowed(updateOptions.runFrom), cap, ...encodeFields(changes)];
      const updated = (await runScript(redis, scripts.updateNode, [keys.run(id)], args)) as number;
      return updated === 1 ? read(id) : undefined;
    },

    async delete(id) {
      assertOpen();
      const [sessionKey, teamId] = await redis.hmget(keys.run(id), "sessionKey", "teamId");
      if (sessionKey == null || teamId == null) return false;
      return remove(id, JSON.parse(sessionKey) as string, JSON.parse(teamId) as string);
    },

    async cleanup(before) {
      assertOpen();
      return cleanupRuns(redis, keys, before, remove);
    },

    async close() {
      closed = true;
    },
  };
}
