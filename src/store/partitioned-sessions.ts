/** The sessions of a partitioned deployment (`redis.partitions`). */
import { partitionOf } from "../redis/keys.js";
import type { SessionStore } from "./store.js";

/** Sessions over partitions: each session in the partition of its key (the one its bus lease is in), `list` over all. */
export function partitionedSessions(parts: SessionStore[]): SessionStore {
  const of = (key: string) => parts[partitionOf(key, parts.length)]!;
  return {
    load: (key) => of(key).load(key),
    append: (key, entries, fence) => of(key).append(key, entries, fence),
    compact: (key, entries, fence) => of(key).compact(key, entries, fence),
    reset: (key, fence) => of(key).reset(key, fence),
    async list() {
      const metas = (await Promise.all(parts.map((part) => part.list()))).flat();
      return metas.sort((left, right) => (left.key < right.key ? -1 : left.key > right.key ? 1 : 0));
    },
  };
}
