/**
 * The chat event log in Redis: kept across gateway restarts and shared by every gateway, so a
 * client gets what it missed whichever gateway it reconnects to.
 *
 * Layout, under the deployment's hash tag, for one channel (`web`):
 * - `{p}:chat-events:<channel>:<chatId>:log` STREAM, field `payload`; its entry ids are the event ids
 *   (`<ms>-<seq>`, growing within the stream). Trimmed to `maxPerChat` on every append.
 * - `{p}:chat-events:<channel>:<chatId>:delivered` STRING the newest id some client was sent;
 *   marks reported within a few ms of each other go to Redis in one script call.
 * Both expire `ttlMs` after the chat's last event, so chats nobody comes back to go away.
 *
 * The chat id is the last free-form part before a fixed suffix (`:log`, `:delivered`), so two
 * chats never share a key.
 */
import { hashTag, type RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import { type ChatEventLog, EVENT_ID_PATTERN, type LoggedEvent, compareEventIds } from "./chat-event-log.js";

export interface RedisChatEventLogOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
  /** The channel whose chats these are (`web`). */
  channel: string;
  /** Events kept per chat. Default 50. */
  maxPerChat?: number;
  /** A chat's events expire this long after its last one. Default 7 days. */
  ttlMs?: number;
}

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  append: loadScript(scriptsDirectory, "append-event-2.lua"),
  markDelivered: loadScript(scriptsDirectory, "mark-delivered-many-1.lua"),
};

/** Delivered marks reported within this long go to Redis together, in one round trip. */
const MARK_BATCH_MS = 10;
/** Chats marked per script call. */
const MARK_BATCH_CHATS = 500;

export function redisChatEventKeys(prefix: string, channel: string, chatId: string): { log: string; delivered: string } {
  if (chatId.length === 0) throw new Error("a chat id must not be empty");
  const base = `${hashTag(prefix)}:chat-events:${channel}:${chatId}`;
  return { log: `${base}:log`, delivered: `${base}:delivered` };
}

export function createRedisChatEventLog(options: RedisChatEventLogOptions): ChatEventLog {
  const { redis, prefix, channel } = options;
  const maxPerChat = options.maxPerChat ?? 50;
  const ttlMs = options.ttlMs ?? 7 * 24 * 60 * 60 * 1000;
  const keysOf = (chatId: string) => redisChatEventKeys(prefix, channel, chatId);
  const markPrefix = `${hashTag(prefix)}:chat-events:${channel}:`;

  // Marks wait a moment for the others that come with them (a burst of replies to many chats).
  let marks = new Map<string, { id: string; settled: Array<{ resolve: () => void; reject: (error: unknown) => void }> }>();
  let markTimer: NodeJS.Timeout | undefined;
  const flushMarks = async () => {
    markTimer = undefined;
    const batch = [...marks];
    marks = new Map();
    for (let start = 0; start < batch.length; start += MARK_BATCH_CHATS) {
      const slice = batch.slice(start, start + MARK_BATCH_CHATS);
      const pairs = slice.flatMap(([chatId, mark]) => [chatId, mark.id]);
      const waiters = slice.flatMap(([, mark]) => mark.settled);
      try {
        await runScript(redis, scripts.markDelivered, [keysOf(slice[0]![0]).delivered], [markPrefix, ttlMs, ...pairs]);
        for (const waiter of waiters) waiter.resolve();
      } catch (error) {
        for (const waiter of waiters) waiter.reject(error);
      }
    }
  };

  return {
    async append(chatId, payload) {
      const keys = keysOf(chatId);
      const [id, previous] = (await runScript(redis, scripts.append, [keys.log, keys.delivered], [payload, maxPerChat, ttlMs])) as [string, string];
      return previous === "" ? { id } : { id, previous };
    },

    async since(chatId, afterId) {
      const keys = keysOf(chatId);
      const after = afterId ?? (await redis.get(keys.delivered)) ?? "0-0";
      if (!EVENT_ID_PATTERN.test(after)) throw new Error(`"${after}" is not an event id`);
      // `(` makes the start exclusive (Redis 6.2).
      const entries = await redis.xrange(keys.log, `(${after}`, "+");
      const events = entries.flatMap(([id, fields]): LoggedEvent[] => {
        const index = fields.indexOf("payload");
        const payload = index >= 0 && index % 2 === 0 ? fields[index + 1] : undefined;
        return payload === undefined ? [] : [{ id, payload }];
      });
      return { events, cursor: entries.at(-1)?.[0] ?? after };
    },

    markDelivered(chatId, id) {
      if (!EVENT_ID_PATTERN.test(id)) return Promise.reject(new Error(`"${id}" is not an event id`));
      try {
        keysOf(chatId);
      } catch (error) {
        return Promise.reject(error);
      }
      return new Promise<void>((resolve, reject) => {
        const pending = marks.get(chatId);
        if (!pending) marks.set(chatId, { id, settled: [{ resolve, reject }] });
        else {
          // Only the newest matters: the mark never moves back.
          if (compareEventIds(id, pending.id) > 0) pending.id = id;
          pending.settled.push({ resolve, reject });
        }
        markTimer ??= setTimeout(() => void flushMarks(), MARK_BATCH_MS);
      });
    },
  };
}
