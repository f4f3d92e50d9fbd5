/**
 * The chat event log in Redis: kept across gateway restarts and shared by every gateway, so a
 * client gets what it missed whichever gateway it reconnects to.
 *
 * Layout, under the deployment's hash tag, for one channel (`web`):
 * - `{p}:chat-events:<channel>:<chatId>:log` STREAM, field `payload`; its entry ids are the event ids
 *   (`<ms>-<seq>`, growing within the stream). Trimmed to `maxPerChat` on every append.
 * - `{p}:chat-events:<channel>:<chatId>:delivered` STRING the newest id some client was sent.
 * Both expire `ttlMs` after the chat's last event, so chats nobody comes back to go away.
 *
 * The chat id is the last free-form part before a fixed suffix (`:log`, `:delivered`), so two
 * chats never share a key.
 */
import { hashTag, type RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import { type ChatEventLog, EVENT_ID_PATTERN, type LoggedEvent } from "./chat-event-log.js";

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

const scripts = { markDelivered: loadScript(new URL("./lua/", import.meta.url), "mark-delivered-1.lua") };

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

  return {
    async append(chatId, payload) {
      const keys = keysOf(chatId);
      const replies = await redis
        .multi()
        .xadd(keys.log, "MAXLEN", maxPerChat, "*", "payload", payload)
        .pexpire(keys.log, ttlMs)
        .pexpire(keys.delivered, ttlMs)
        .exec();
      const [error, id] = replies?.[0] ?? [new Error("the transaction was discarded"), undefined];
      if (error) throw error;
      return String(id);
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

    async markDelivered(chatId, id) {
      if (!EVENT_ID_PATTERN.test(id)) throw new Error(`"${id}" is not an event id`);
      await runScript(redis, scripts.markDelivered, [keysOf(chatId).delivered], [id, ttlMs]);
    },
  };
}
