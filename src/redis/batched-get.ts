/**
 * GETs of one moment (one turn of the event loop) on one connection, sent as one MGET per hash tag:
 * a worker running many turns at once reads each turn's chat memory and its speakers' memory in a
 * few calls instead of two per turn. Alone, a read costs one call, as a GET did, and waits one turn
 * of the event loop for the others. Keys without a hash tag are read with the others of no tag
 * (one slot each on a cluster, so there they should not be batched: no caller sends them).
 */
import type { RedisClient } from "./client.js";

interface PendingGet {
  key: string;
  resolve: (value: string | null) => void;
  reject: (error: unknown) => void;
}

/** Per connection: the reads waiting for the next flush, by hash tag. */
const waiting = new WeakMap<RedisClient, Map<string, PendingGet[]>>();

const tagOf = (key: string): string => /\{[^}]*\}/.exec(key)?.[0] ?? "";

export function batchedGet(redis: RedisClient, key: string): Promise<string | null> {
  return new Promise((resolve, reject) => {
    let byTag = waiting.get(redis);
    if (!byTag) {
      byTag = new Map();
      waiting.set(redis, byTag);
      setImmediate(() => flush(redis));
    }
    const tag = tagOf(key);
    const reads = byTag.get(tag) ?? [];
    reads.push({ key, resolve, reject });
    byTag.set(tag, reads);
  });
}

function flush(redis: RedisClient): void {
  const byTag = waiting.get(redis);
  waiting.delete(redis);
  for (const reads of byTag?.values() ?? []) {
    redis.mget(...reads.map((read) => read.key)).then(
      (values) => reads.forEach((read, index) => read.resolve(values[index] ?? null)),
      (error: unknown) => reads.forEach((read) => read.reject(error)),
    );
  }
}
