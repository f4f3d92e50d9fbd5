/**
 * Whether workers share one workspace. Files the agent writes land on the disk of the worker that
 * ran the turn; scaled out over several machines, the workspace must be one shared volume. Each
 * worker leaves a marker file in its workspace and records its name in Redis; a worker (or
 * `countbot doctor`) that cannot see the markers of the others says so.
 */
import { randomUUID } from "node:crypto";
import { access, rm, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import path from "node:path";
import type { RedisClient } from "../redis/client.js";

/** A marker older than this belongs to a worker that is gone. */
const MARKER_TTL_MS = 24 * 60 * 60 * 1000;

export interface WorkspaceCheck {
  /** Other workers' markers this workspace lacks: those workers write files this one cannot see. */
  missing: Array<{ host: string; file: string }>;
  /** How many other workers' markers were checked. */
  checked: number;
}

export interface WorkspaceMarker {
  check(): Promise<WorkspaceCheck>;
  remove(): Promise<void>;
}

/** Leaves this worker's marker in `workspace` and in Redis. */
export async function placeWorkspaceMarker(redis: RedisClient, prefix: string, workspace: string): Promise<WorkspaceMarker> {
  const id = randomUUID();
  const file = `.countbot-worker-${id}`;
  await writeFile(path.join(workspace, file), `${hostname()} ${new Date().toISOString()}\n`);
  const key = `{${prefix}}:workspace-markers`;
  await redis.hset(key, id, JSON.stringify({ file, host: hostname(), at: Date.now() }));
  return {
    check: () => checkWorkspaceMarkers(redis, prefix, workspace, id),
    async remove() {
      await redis.hdel(key, id).catch(() => undefined);
      await rm(path.join(workspace, file), { force: true });
    },
  };
}

/** The other workers' markers, and which of them this workspace lacks. */
export async function checkWorkspaceMarkers(redis: RedisClient, prefix: string, workspace: string, except?: string): Promise<WorkspaceCheck> {
  const key = `{${prefix}}:workspace-markers`;
  const entries = Object.entries(await redis.hgetall(key));
  const now = Date.now();
  const missing: WorkspaceCheck["missing"] = [];
  let checked = 0;
  for (const [id, value] of entries) {
    if (id === except) continue;
    const marker = JSON.parse(value) as { file: string; host: string; at: number };
    if (now - marker.at > MARKER_TTL_MS) {
      await redis.hdel(key, id);
      continue;
    }
    checked += 1;
    try {
      await access(path.join(workspace, marker.file));
    } catch {
      missing.push({ host: marker.host, file: marker.file });
    }
  }
  return { missing, checked };
}

/** The warning for workers that do not share a workspace. */
export function workspaceWarning(check: WorkspaceCheck, workspace: string): string | undefined {
  if (check.missing.length === 0) return undefined;
  const hosts = [...new Set(check.missing.map((marker) => marker.host))].join(", ");
  return `the workspace ${workspace} is not shared with ${check.missing.length} other worker(s) (on ${hosts}): files the agent writes on one are not seen by the others; mount one shared volume at the workspace on every worker`;
}
