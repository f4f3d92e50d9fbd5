/**
 * The tool history in Redis: one bounded LIST per session, written by whichever worker ran the
 * calls and read by any gateway through the same API (`GET /api/sessions/:key/tool-history`).
 *
 * Layout, under the deployment's hash tag: `{p}:tool-history:<sessionKey>` LIST of JSON entries,
 * oldest first. Each add is RPUSH + LTRIM to the last `maxEntries` + PEXPIRE in one MULTI, so the
 * bound holds with any number of writers and a session nobody used for `ttlMs` goes away.
 */
import { hashTag, type RedisClient } from "../redis/client.js";
import {
  DEFAULT_TOOL_HISTORY_ENTRIES,
  type ToolHistory,
  type ToolHistoryEntry,
  type ToolHistoryEntryOptions,
  parseEntry,
  selectEntries,
  toolHistoryEntryMaker,
} from "./tool-history.js";

export interface RedisToolHistoryOptions extends ToolHistoryEntryOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
  /** A session's history expires this long after its last call. Default 30 days. */
  ttlMs?: number;
}

export function redisToolHistoryKey(prefix: string, sessionKey: string): string {
  if (sessionKey.length === 0) throw new Error("a session key must not be empty");
  return `${hashTag(prefix)}:tool-history:${sessionKey}`;
}

export function createRedisToolHistory(options: RedisToolHistoryOptions): ToolHistory {
  const { redis, prefix } = options;
  const maxEntries = options.maxEntries ?? DEFAULT_TOOL_HISTORY_ENTRIES;
  const ttlMs = options.ttlMs ?? 30 * 24 * 60 * 60 * 1000;
  const entryOf = toolHistoryEntryMaker(options);
  const pending = new Set<Promise<unknown>>();
  let closed = false;

  function tracked<T>(operation: () => Promise<T>): Promise<T> {
    if (closed) return Promise.reject(new Error("the tool history is closed"));
    const running = Promise.resolve().then(operation);
    pending.add(running);
    void running.catch(() => undefined).finally(() => pending.delete(running));
    return running;
  }

  return {
    add: (input) =>
      tracked(async () => {
        const key = redisToolHistoryKey(prefix, input.sessionKey);
        const replies = await redis.multi().rpush(key, JSON.stringify(entryOf(input))).ltrim(key, -maxEntries, -1).pexpire(key, ttlMs).exec();
        const failed = replies?.find(([error]) => error)?.[0];
        if (failed) throw failed;
      }),

    list: (sessionKey, listOptions = {}) =>
      tracked(async () => {
        const texts = await redis.lrange(redisToolHistoryKey(prefix, sessionKey), 0, -1);
        const entries = texts.flatMap((text): ToolHistoryEntry[] => {
          const entry = parseEntry(text);
          return entry ? [entry] : [];
        });
        return selectEntries(entries, listOptions);
      }),

    clear: (sessionKey) =>
      tracked(async () => {
        await redis.del(redisToolHistoryKey(prefix, sessionKey));
      }),

    async close() {
      closed = true;
      await Promise.allSettled([...pending]);
    },
  };
}
