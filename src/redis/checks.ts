/**
 * Start-up checks of the Redis a deployment depends on: version 6.2 or newer (XAUTOCLAIM, GETDEL,
 * ZADD GT/LT), and a maxmemory-policy of noeviction, since any other policy may silently evict
 * queued messages and leases under memory pressure.
 */
import type { RedisClient } from "./client.js";
import { ConfigError } from "../errors.js";

export interface RedisCheckResult {
  version: string;
  evictionPolicy: string | undefined;
  warnings: string[];
}

export async function checkRedis(redis: RedisClient, options: { evictionPolicy: "warn" | "refuse" }): Promise<RedisCheckResult> {
  const info = await redis.info("server");
  const version = /redis_version:([\d.]+)/.exec(info)?.[1] ?? "unknown";
  if (!atLeast(version, [6, 2])) {
    throw new ConfigError(`Redis ${version} is too old: CountBot needs Redis 6.2 or newer (redis.url)`, "redis.url");
  }
  const warnings: string[] = [];
  let evictionPolicy: string | undefined;
  try {
    const reply = (await redis.config("GET", "maxmemory-policy")) as string[];
    evictionPolicy = reply[1];
  } catch {
    warnings.push("could not read maxmemory-policy (CONFIG is disabled?): make sure it is noeviction, or queued messages may be evicted");
  }
  if (evictionPolicy !== undefined && evictionPolicy !== "noeviction") {
    const message = `Redis maxmemory-policy is "${evictionPolicy}": under memory pressure Redis may evict queued messages and leases. Set it to noeviction.`;
    if (options.evictionPolicy === "refuse") throw new ConfigError(`${message} (redis.evictionPolicy is "refuse")`, "redis.evictionPolicy");
    warnings.push(message);
  }
  return { version, evictionPolicy, warnings };
}

function atLeast(version: string, minimum: [number, number]): boolean {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  return major > minimum[0] || (major === minimum[0] && minor >= minimum[1]);
}
