/**
 * The events a chat's client must not miss (a web page's finals and task notices), kept per chat,
 * bounded, each with an id that grows within the chat. A client that reconnects with the last id
 * it saw gets exactly what came after; one that brings no id gets what no client was sent yet (the
 * "delivered" mark). Two implementations, one conformance suite: in this process (the embedded
 * deployment, where the gateway is the only reader) and Redis (./redis-chat-event-log.ts), shared by
 * every gateway and kept across their restarts.
 *
 * Ids look like Redis stream ids, `<number>-<number>`, in both implementations, so a client's
 * resume token means the same whichever implementation serves it: compare them with
 * {@link compareEventIds}, never as strings.
 */

/** One kept event: its id in the chat's log and what it carries (JSON text, the caller's). */
export interface LoggedEvent {
  id: string;
  payload: string;
}

/** What `append` kept: the event's id, and the chat's newest id before it. */
export interface AppendedEvent {
  id: string;
  /**
   * The id of the event kept just before this one in the chat (none: the log was empty). A reader
   * that read up to `previous` has exactly this event left to read.
   */
  previous?: string;
}

export interface ChatEventLog {
  /** Keeps `payload` for `chatId`; resolves with its id, greater than every earlier id of the chat. */
  append(chatId: string, payload: string): Promise<AppendedEvent>;
  /**
   * The chat's kept events after `afterId`, oldest first; without it, those after the delivered
   * mark. An `afterId` older than what is kept gets everything kept (the oldest were dropped).
   * `cursor` is where to continue from: the last event returned, else where this read started
   * (`afterId`, the delivered mark, or `0-0`).
   */
  since(chatId: string, afterId?: string): Promise<{ events: LoggedEvent[]; cursor: string }>;
  /** Some client was sent the event `id`: moves the chat's delivered mark up to it (never back). */
  markDelivered(chatId: string, id: string): Promise<void>;
}

/** `<number>-<number>`: an id a log handed out (a client's resume token is checked against it). */
export const EVENT_ID_PATTERN = /^\d{1,20}-\d{1,20}$/;

/** Negative, zero or positive as `left` is before, the same as, or after `right`. */
export function compareEventIds(left: string, right: string): number {
  const [leftTime = 0, leftSequence = 0] = left.split("-").map(BigInt);
  const [rightTime = 0, rightSequence = 0] = right.split("-").map(BigInt);
  if (leftTime !== rightTime) return leftTime < rightTime ? -1 : 1;
  if (leftSequence !== rightSequence) return leftSequence < rightSequence ? -1 : 1;
  return 0;
}

export interface MemoryChatEventLogOptions {
  /** Events kept per chat; the oldest go first. Default 50. */
  maxPerChat?: number;
  /** Chats kept; the one written longest ago goes first. Default 10,000. */
  maxChats?: number;
  /**
   * Memory all kept events may take, counted as their payloads' UTF-8 bytes plus
   * {@link EVENT_OVERHEAD_BYTES} each; beyond it the chat written longest ago loses its oldest
   * events first. Default 4 MiB. The chat just written keeps at least its newest event.
   */
  maxBytes?: number;
  /** Told how many events of a chat were dropped to stay within the bounds. */
  onDrop?: (chatId: string, dropped: number) => void;
  /** Clock in ms since epoch, the first part of ids. */
  now?: () => number;
}

interface ChatLog {
  events: Array<LoggedEvent & { bytes: number }>;
  delivered?: string;
}

/** What an event costs beyond its payload: its id, the object and its place in the chat's list. */
export const EVENT_OVERHEAD_BYTES = 100;

/** The log in this process: what the embedded deployment's one gateway needs; lost on restart. */
export function createMemoryChatEventLog(options: MemoryChatEventLogOptions = {}): ChatEventLog {
  const maxPerChat = options.maxPerChat ?? 50;
  const maxChats = options.maxChats ?? 10_000;
  const maxBytes = options.maxBytes ?? 4 * 1024 * 1024;
  const now = options.now ?? Date.now;
  const chats = new Map<string, ChatLog>();
  // Without a bound in bytes a busy single process would keep 50 replies for each of 10,000 chats.
  let bytes = 0;
  const drop = (chatId: string, log: ChatLog, count: number) => {
    const dropped = log.events.splice(0, count);
    for (const event of dropped) bytes -= event.bytes;
    options.onDrop?.(chatId, dropped.length);
  };
  // Time first, as Redis makes stream ids: a page's token from before a restart stays older than
  // what comes after it (a bare counter would start again at 1 and hide every new event).
  let last = { time: 0, sequence: 0 };

  return {
    async append(chatId, payload) {
      const log = chats.get(chatId) ?? { events: [] };
      // Most recently written last, so the first entry is the one to drop.
      chats.delete(chatId);
      chats.set(chatId, log);
      const time = now();
      last = time > last.time ? { time, sequence: 0 } : { time: last.time, sequence: last.sequence + 1 };
      const id = `${last.time}-${last.sequence}`;
      const previous = log.events.at(-1)?.id;
      const cost = Buffer.byteLength(payload) + EVENT_OVERHEAD_BYTES;
      log.events.push({ id, payload, bytes: cost });
      bytes += cost;
      if (log.events.length > maxPerChat) drop(chatId, log, log.events.length - maxPerChat);
      while (chats.size > maxChats) {
        const [oldest, dropped] = chats.entries().next().value!;
        chats.delete(oldest);
        drop(oldest, dropped, dropped.events.length);
      }
      while (bytes > maxBytes) {
        const [oldest, oldestLog] = chats.entries().next().value!;
        if (oldest === chatId && log.events.length === 1) break;
        drop(oldest, oldestLog, 1);
        if (oldestLog.events.length === 0) chats.delete(oldest);
      }
      return previous === undefined ? { id } : { id, previous };
    },

    async since(chatId, afterId) {
      const log = chats.get(chatId);
      const after = afterId ?? log?.delivered ?? "0-0";
      const events = (log?.events ?? []).filter((event) => compareEventIds(event.id, after) > 0).map(({ id, payload }) => ({ id, payload }));
      return { events, cursor: events.at(-1)?.id ?? after };
    },

    async markDelivered(chatId, id) {
      const log = chats.get(chatId);
      if (log && (log.delivered === undefined || compareEventIds(id, log.delivered) > 0)) log.delivered = id;
    },
  };
}
