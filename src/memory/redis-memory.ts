/**
 * Memory in Redis, for gateways and workers: a chat's memory follows it to whichever worker serves
 * its next message. Same contract and semantics as the `MEMORY.md` files (./memory.ts); the
 * locations it reports are the files' paths behind `redis:`, so an export lands where the embedded
 * deployment would keep it.
 *
 * Layout, under the deployment's hash tag:
 * - `{p}:memory:global:current` STRING the global memory
 * - `{p}:memory:chat:<sessionKey>:current` STRING a chat's memory (chat scope)
 * - `{p}:memory:person:<personKey>:current` STRING a person's memory (person scope)
 * - `…:archive:<ms>` STRING what `archive` moved aside at that time, beside the memory's key
 *
 * The session key is the last free-form part before a fixed suffix (`:current`, `:archive:<digits>`),
 * so two sessions never share a key. Appends and archiving are Lua scripts (./lua): one step each,
 * so concurrent writers never lose each other's text.
 */
import { batchedGet } from "../redis/batched-get.js";
import { hashTag, type RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import {
  DEFAULT_MEMORY_MAX_BYTES,
  type MemoryStore,
  type MemoryStoreOptions,
  archiveNameOf,
  checkMemorySize,
  memoryPathOf,
  searchMemory,
  withSection,
} from "./memory.js";

export interface RedisMemoryStoreOptions extends MemoryStoreOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
  /** An agent profile's own memory (src/config/agents.ts): its keys apart from every other profile's. Absent: the default profile's. */
  namespace?: string;
}

export interface RedisMemoryKeys {
  /** The memory the session reads and writes (the global one in global scope). */
  current(sessionKey: string): string;
  archive(sessionKey: string, time: number): string;
  global: string;
}

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  append: loadScript(scriptsDirectory, "append-memory-1.lua"),
  archive: loadScript(scriptsDirectory, "archive-memory-2.lua"),
};

export function redisMemoryKeys(prefix: string, scope: MemoryStoreOptions["scope"], namespace?: string): RedisMemoryKeys {
  const tag = namespace === undefined ? hashTag(prefix) : `${hashTag(prefix)}:agents:${namespace}`;
  const base = (sessionKey: string) => {
    if (sessionKey.length === 0) throw new Error("a session key must not be empty");
    return scope === "global" ? `${tag}:memory:global` : `${tag}:memory:${scope}:${sessionKey}`;
  };
  return {
    current: (sessionKey) => `${base(sessionKey)}:current`,
    archive: (sessionKey, time) => `${base(sessionKey)}:archive:${time}`,
    global: `${tag}:memory:global:current`,
  };
}

export function createRedisMemoryStore(options: RedisMemoryStoreOptions): MemoryStore {
  const { redis, scope } = options;
  const maxBytes = options.maxBytes ?? DEFAULT_MEMORY_MAX_BYTES;
  const now = options.now ?? Date.now;
  const keys = redisMemoryKeys(options.prefix, scope, options.namespace);
  const location = (sessionKey: string) => `redis:${memoryPathOf(scope, sessionKey)}`;

  // Batched with the other reads of the moment (a turn's chat and person memory, other turns'): one MGET.
  const read = async (sessionKey: string) => (await batchedGet(redis, keys.current(sessionKey))) ?? "";

  const store: MemoryStore = {
    scope,
    location,
    read,

    async write(sessionKey, content) {
      checkMemorySize(location(sessionKey), Buffer.byteLength(content, "utf8"), maxBytes);
      await redis.set(keys.current(sessionKey), content);
    },

    async append(sessionKey, text) {
      // The section is dated here, with this host's clock, like the file store's.
      const section = withSection("", text, now());
      const [appended, bytes] = (await runScript(redis, scripts.append, [keys.current(sessionKey)], [section, maxBytes])) as [number, number];
      if (appended !== 1) checkMemorySize(location(sessionKey), bytes, maxBytes);
    },

    search: (sessionKey, query) =>
      searchMemory(store, async (which) => (which === "global" ? ((await redis.get(keys.global)) ?? "") : read(sessionKey)), sessionKey, query, "redis:memory/MEMORY.md"),

    async archive(sessionKey) {
      const time = now();
      const name = archiveNameOf(time);
      await runScript(redis, scripts.archive, [keys.current(sessionKey), keys.archive(sessionKey, time)], [`Older memory is in ${name} beside this one.\n`]);
      return location(sessionKey).replace(/MEMORY\.md$/, name);
    },
  };
  return store;
}
