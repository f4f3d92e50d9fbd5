/**
 * The chat event log in Redis: kept across gateway restarts and shared by every gateway, so a
 * client gets what it missed whichever gateway it reconnects to.
 *
 * Layout, under the deployment's hash tag, for one channel (`web`):
 * - `{p}:chat-events:<channel>:<chatId>:log` STREAM, field `payload`; its entry ids are the event ids
 *   (`<ms>-<seq>`, growing within the stream). Trimmed to `maxPerChat` on every append. Events kept
 *   in one moment (one turn of the event loop), of any chats, go to Redis in one script call.
 * - `{p}:chat-events:<channel>:<chatId>:delivered` STRING the newest id some client was sent;
 *   marks reported within a few ms of each other go to Redis in one script call.
 * Both expire at least `ttlMs` after the chat's last event, so chats nobody comes back to go away.
 * Their expiry is not renewed on every event: an append renews it (to `ttlMs` plus a tenth) when
 * this process has not renewed that chat's in the last tenth of `ttlMs`, and whenever the log was
 * new; a mark sets its own to the same. So a log lives between `ttlMs` and 1.1 × `ttlMs` after its
 * last event, its mark at least as long, and a busy chat's events cost no PEXPIRE.
 *
 * The chat id is the last free-form part before a fixed suffix (`:log`, `:delivered`), so two
 * chats never share a key.
 */
import { hashTag, type RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import { ExpiringMap } from "../bus/expiring-map.js";
import { type AppendedEvent, type ChatEventLog, EVENT_ID_PATTERN, type LoggedEvent, compareEventIds } from "./chat-event-log.js";

export interface RedisChatEventLogOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
  /** The channel whose chats these are (`web`). */
  channel: string;
  /** Events kept per chat. Default 50. */
  maxPerChat?: number;
  /** A chat's events expire this long after its last one (up to a tenth longer, see above). Default 7 days. */
  ttlMs?: number;
  /** The clock of the expiry renewals. Default Date.now. */
  now?: () => number;
}

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  append: loadScript(scriptsDirectory, "append-events-many-1.lua"),
  markDelivered: loadScript(scriptsDirectory, "mark-delivered-many-1.lua"),
};

/** Events kept per script call. */
const APPEND_BATCH_EVENTS = 500;
/** Chats whose expiry this process remembers having renewed. */
const RENEWALS_KEPT = 100_000;

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
  // A renewal sets the expiry a tenth past `ttlMs`, and the next comes within that tenth.
  const renewEveryMs = Math.max(1, Math.floor(ttlMs / 10));
  const expiryMs = ttlMs + renewEveryMs;
  const append = appendBatcher({ redis, markPrefix, maxPerChat, expiryMs, renewEveryMs, now: options.now ?? Date.now, logKey: (chatId) => keysOf(chatId).log });

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
        await runScript(redis, scripts.markDelivered, [keysOf(slice[0]![0]).delivered], [markPrefix, expiryMs, ...pairs]);
        for (const waiter of waiters) waiter.resolve();
      } catch (error) {
        for (const waiter of waiters) waiter.reject(error);
      }
    }
  };

  return {
    append(chatId, payload) {
      try {
        keysOf(chatId);
      } catch (error) {
        return Promise.reject(error);
      }
      return append(chatId, payload);
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

interface AppendBatcherOptions {
  redis: RedisClient;
  markPrefix: string;
  maxPerChat: number;
  expiryMs: number;
  renewEveryMs: number;
  now: () => number;
  logKey: (chatId: string) => string;
}

/**
 * Appends of one moment (one turn of the event loop), of any chats, in one script call; each asks
 * for its chat's expiry to be renewed when this process has not renewed it in `renewEveryMs`.
 */
function appendBatcher(options: AppendBatcherOptions): (chatId: string, payload: string) => Promise<AppendedEvent> {
  const { redis, markPrefix, maxPerChat, expiryMs } = options;
  const renewed = new ExpiringMap<true>(options.renewEveryMs, options.now, RENEWALS_KEPT);
  let appends: Array<{ chatId: string; payload: string; renew: boolean; resolve: (event: AppendedEvent) => void; reject: (error: unknown) => void }> = [];
  const flush = async () => {
    const batch = appends;
    appends = [];
    for (let start = 0; start < batch.length; start += APPEND_BATCH_EVENTS) {
      const slice = batch.slice(start, start + APPEND_BATCH_EVENTS);
      const triples = slice.flatMap(({ chatId, payload, renew }) => [chatId, payload, renew ? "1" : ""]);
      try {
        const reply = (await runScript(redis, scripts.append, [options.logKey(slice[0]!.chatId)], [markPrefix, maxPerChat, expiryMs, ...triples])) as string[];
        slice.forEach(({ resolve }, index) => {
          const [id, previous] = [reply[2 * index]!, reply[2 * index + 1]!];
          resolve(previous === "" ? { id } : { id, previous });
        });
      } catch (error) {
        // Renewed nothing: the next append of these chats asks again.
        for (const { chatId, reject } of slice) {
          renewed.delete(chatId);
          reject(error);
        }
      }
    }
  };
  return (chatId, payload) => {
    const renew = !renewed.has(chatId);
    if (renew) renewed.set(chatId, true);
    return new Promise<AppendedEvent>((resolve, reject) => {
      if (appends.length === 0) setImmediate(() => void flush());
      appends.push({ chatId, payload, renew, resolve, reject });
    });
  };
}
