/** What operators and metrics read of a Redis bus (one partition's, or a whole one's): its counts and its dead letters. */
import type { RedisClient } from "../redis/client.js";
import type { InboundMessage } from "./message.js";
import type { BusStats, DeadLetter } from "./message-bus.js";
import type { BusKeys } from "./redis-keys.js";

/** Sessions waiting, sessions leased by a living worker, dead letters kept. */
export async function busStats(redis: RedisClient, keys: BusKeys, now: number): Promise<BusStats> {
  const [ready, leases, alive, deadLetters] = await Promise.all([redis.zcard(keys.ready), redis.hgetall(keys.own), redis.zrangebyscore(keys.workers, `(${now}`, "+inf"), redis.llen(keys.dead)]);
  const living = new Set(alive);
  const leased = Object.values(leases).filter((lease) => living.has(lease.slice(lease.indexOf(":") + 1))).length;
  return { ready, leased, deadLetters };
}

/** The newest `limit` dead letters, newest first. */
export async function readDeadLetters(redis: RedisClient, keys: BusKeys, limit: number): Promise<DeadLetter[]> {
  const raw = await redis.lrange(keys.dead, 0, limit - 1);
  return raw.map((line) => {
    const letter = JSON.parse(line) as Omit<DeadLetter, "messages"> & { messages: string[] | Record<string, never> };
    const messages = Array.isArray(letter.messages) ? letter.messages : [];
    return { ...letter, messages: messages.map((message) => JSON.parse(message) as InboundMessage) };
  });
}
