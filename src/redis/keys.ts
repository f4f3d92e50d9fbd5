/**
 * The hash-tag convention every Redis user follows (bus, store, memory, budgets, jobs), so that the
 * same keys work on one Redis and on a Redis Cluster:
 *
 * 1. A Lua script, a MULTI or a multi-key command touches keys of ONE hash tag only: a cluster
 *    refuses a command whose keys fall in different slots (CROSSSLOT).
 * 2. A chat's keys carry the chat's partition tag, `{<prefix>:p<k>}` (`chatTag`), where k is
 *    `partitionOf(sessionKey, partitions)`: the bus's mailbox and lease of the chat, and anything a
 *    script checks against that lease or writes together with it (history, a per-chat budget
 *    reservation, a person's memory of that chat). `redis.partitions` (1 on one Redis) says how many
 *    there are; every process of a deployment must use the same number.
 * 3. Deployment-wide keys carry `{<prefix>}` (`hashTag`), one slot; an area of its own that is busy
 *    enough to deserve its own slot takes `{<prefix>:<area>}` (`areaTag`), e.g. `{countbot:budget}`.
 * 4. A new script names its keys in KEYS (never builds a key of another tag inside Lua), so the
 *    cluster client can route it by its first key.
 *
 * The partition of a session key is FNV-1a (32 bit) of its UTF-8 bytes modulo the partition count:
 * stable across processes, versions and languages (a Lua script can compute it too).
 */

/** `{prefix}`: the hash tag of deployment-wide keys (one cluster slot). */
export function hashTag(prefix: string): string {
  return `{${prefix}}`;
}

/** `{prefix:area}`: the hash tag of an area that wants a slot of its own (budgets, jobs, ...). */
export function areaTag(prefix: string, area: string): string {
  return `{${prefix}:${area}}`;
}

/** `{prefix:p<k>}`: the hash tag of partition k. */
export function partitionTag(prefix: string, partition: number): string {
  return `{${prefix}:p${partition}}`;
}

/** The partition (0 .. partitions-1) a session key belongs to. */
export function partitionOf(sessionKey: string, partitions: number): number {
  if (partitions <= 1) return 0;
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(sessionKey, "utf8")) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % partitions;
}

/** The hash tag of a chat's keys: its partition's. */
export function chatTag(prefix: string, sessionKey: string, partitions: number): string {
  return partitionTag(prefix, partitionOf(sessionKey, partitions));
}
