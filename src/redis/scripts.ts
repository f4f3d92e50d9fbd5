/**
 * Lua scripts live in `.lua` files named `<name>-<number of keys>.lua`, each opening with a
 * KEYS/ARGV header. They run with EVALSHA, falling back to EVAL once when Redis has not seen them
 * (a fresh server or after SCRIPT FLUSH).
 *
 * A line `--- @include "<path>"` (BullMQ's syntax) is replaced by that file at load time, so a
 * check shared by several scripts is written once. The path is relative to the including file,
 * `.lua` may be left off, each file is spliced in at most once per script (a second include of it,
 * or a cycle, adds nothing), and a missing file fails the load. The sha is the spliced source's:
 * that is what Redis runs.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { RedisClient } from "./client.js";

export interface LuaScript {
  name: string;
  keyCount: number;
  source: string;
  sha: string;
}

const includeLine = /^--- @include "([^"]+)"[ \t]*$/gm;

/** Reads `<directory>/<file>`; the key count comes from the file name (`ack-5.lua` → 5). */
export function loadScript(directory: string | URL, file: string): LuaScript {
  const match = /^(.+)-(\d+)\.lua$/.exec(file);
  if (!match) throw new Error(`Lua script file "${file}" must be named <name>-<keys>.lua`);
  const root = typeof directory === "string" ? directory : fileURLToPath(directory);
  const source = spliceIncludes(path.join(root, file), new Set());
  return { name: match[1]!, keyCount: Number(match[2]), source, sha: createHash("sha1").update(source).digest("hex") };
}

/** The file at `filePath` with its include lines replaced, recursively; `spliced` holds the files already in. */
function spliceIncludes(filePath: string, spliced: Set<string>): string {
  spliced.add(filePath);
  return readFileSync(filePath, "utf8").replace(includeLine, (_line, target: string) => {
    const includePath = path.resolve(path.dirname(filePath), target.endsWith(".lua") ? target : `${target}.lua`);
    if (spliced.has(includePath)) return "";
    if (!existsSync(includePath)) {
      throw new Error(`Lua script ${filePath} includes "${target}", which does not exist (${includePath})`);
    }
    return spliceIncludes(includePath, spliced).replace(/\n$/, "");
  });
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
