/** Test helpers for the real Redis at REDIS_URL: each test uses its own prefix and removes its keys. */
import type { Redis } from "ioredis";

export const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

/** Deletes every key under the hash tag `{prefix}`. */
export async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = "0";
  do {
    // `{prefix}` and the partitions' and areas' `{prefix:...}` tags alike.
    const [next, keys] = await redis.scan(cursor, "MATCH", `{${prefix}[}:]*`, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== "0");
}

/**
 * The commands Redis executed on keys of the hash tag `{prefix}` while `work` ran, scripts' own
 * included (MONITOR shows those too), by name: what a change to the work per message is judged by.
 */
export async function commandsOn(redis: Redis, prefix: string, work: () => Promise<unknown>): Promise<Record<string, number>> {
  const monitor = await redis.monitor();
  const tag = `{${prefix}}`;
  const end = `${tag}:commands-on-end`;
  const counts: Record<string, number> = {};
  let ended!: () => void;
  const seen = new Promise<void>((resolve) => (ended = resolve));
  monitor.on("monitor", (_time: string, args: string[]) => {
    if (args.includes(end)) return ended();
    const name = args[0]?.toLowerCase();
    if (name === undefined || !args.some((arg) => arg.includes(tag))) return;
    counts[name] = (counts[name] ?? 0) + 1;
  });
  try {
    await work();
    // MONITOR reports in execution order: once this is seen, everything before it was.
    await redis.exists(end);
    await seen;
  } finally {
    monitor.disconnect();
  }
  return counts;
}

/** `redis` as a client that counts the script calls (EVALSHA, EVAL) sent through it. */
export function countingScripts(redis: Redis): { client: Redis; scripts: () => number } {
  let scripts = 0;
  const client = new Proxy(redis, {
    get(target, property, receiver) {
      if (property === "evalsha" || property === "eval") {
        return (...args: unknown[]) => {
          scripts += 1;
          return (target[property] as (...rest: unknown[]) => Promise<unknown>).apply(target, args);
        };
      }
      return Reflect.get(target, property, receiver);
    },
  });
  return { client, scripts: () => scripts };
}
