/**
 * The Redis commands CountBot uses, as an interface (BullMQ's habit): the bus and the store depend
 * on this, not on a client library. ioredis's `Redis` satisfies it.
 */
import { Redis } from "ioredis";

export type RedisClient = Redis;

/** A connection for `url` that fails fast on start-up instead of queueing commands forever. */
export function connectRedis(url: string, options: { name?: string } = {}): Redis {
  return new Redis(url, {
    connectionName: options.name,
    // Blocking commands (BLPOP, XREADGROUP BLOCK) must not be cut off by a command timeout.
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    lazyConnect: false,
  });
}

/** `{prefix}`: the hash tag that keeps every key of one deployment in one cluster slot. */
export function hashTag(prefix: string): string {
  return `{${prefix}}`;
}
