/**
 * Lua scripts live in `.lua` files named `<name>-<number of keys>.lua`, each opening with a
 * KEYS/ARGV header. They run with EVALSHA, falling back to EVAL once when Redis has not seen them
 * (a fresh server or after SCRIPT FLUSH).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { RedisClient } from "./client.js";

export interface LuaScript {
  name: string;
  keyCount: number;
  source: string;
  sha: string;
}

/** Reads `<directory>/<file>`; the key count comes from the file name (`ack-5.lua` → 5). */
export function loadScript(directory: string | URL, file: string): LuaScript {
  const match = /^(.+)-(\d+)\.lua$/.exec(file);
  if (!match) throw new Error(`Lua script file "${file}" must be named <name>-<keys>.lua`);
  const root = typeof directory === "string" ? directory : fileURLToPath(directory);
  const source = readFileSync(path.join(root, file), "utf8");
  return { name: match[1]!, keyCount: Number(match[2]), source, sha: createHash("sha1").update(source).digest("hex") };
}

export async function runScript(redis: RedisClient, script: LuaScript, keys: string[], args: Array<string | number>): Promise<unknown> {
  if (keys.length !== script.keyCount) {
    throw new Error(`script ${script.name} takes ${script.keyCount} keys, got ${keys.length}`);
  }
  try {
    return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error;
    return redis.eval(script.source, keys.length, ...keys, ...args);
  }
}
