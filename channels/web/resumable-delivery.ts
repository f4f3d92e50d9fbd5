/**
 * Delivery of the events a web page must not miss (finals, task notices) to its sockets, from the
 * chat's event log: a socket that opens with `after=<seq>` gets everything the log kept after that
 * id, one without gets what no socket was sent yet, and then everything that comes.
 *
 * The log is the only source: a new event (kept here, or fanned out by another gateway) only wakes
 * the chat's sockets, and each socket reads the log from the last id it was sent. So a socket gets
 * every event once and in log order, with no gap, even when two gateways log events at once and
 * their fan-outs cross (an event logged first may be announced last); the `seq` a page saw last
 * is always a correct resume token. An event the socket was sent already (by id and part, when a
 * re-run turn logged it twice) is skipped. A write that succeeded marks the event delivered in the
 * log, for a page that comes back without a token.
 */
import type { Logger } from "pino";
import type { WebSocket } from "ws";
import { type AppendedEvent, type ChatEventLog, compareEventIds } from "../../src/gateway/kit/index.js";

interface SocketState {
  /** Where this socket's next read starts; unknown until the first read (no token). */
  cursor?: string;
  reading: boolean;
  /** Woken during a read: read again once it is done. */
  again: boolean;
  /** Events sent (type, id and part), so a duplicate in the log is sent once. */
  sent: Set<string>;
  /** After a failed read: the next read's timer, and the wait before it (doubling). */
  retry?: NodeJS.Timeout;
  retryMs: number;
}

/** Events remembered per socket for the duplicate check; a log keeps far fewer than this. */
const MAX_REMEMBERED = 1_000;
/** A failed read is tried again after this long, doubling up to RETRY_MAX_MS while it keeps failing. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 5_000;

export class ResumableDelivery {
  private readonly states = new WeakMap<WebSocket, SocketState>();

  constructor(
    private readonly events: ChatEventLog,
    private readonly logger: Logger,
  ) {}

  /** Starts `socket` on `chatId` from `after` (or from what no socket was sent yet). */
  attach(chatId: string, socket: WebSocket, after: string | undefined): void {
    const state: SocketState = { cursor: after, reading: false, again: false, sent: new Set(), retryMs: RETRY_FIRST_MS };
    this.states.set(socket, state);
    this.read(chatId, socket, state);
  }

  /**
   * An event was just kept in the chat's log: a socket that had read up to the event before it (or
   * the log was empty, and it has read everything) is sent this one at once, nothing else can be
   * between; any other socket reads the log.
   */
  appended(chatId: string, sockets: WebSocket[], event: AppendedEvent & { payload: string }): void {
    for (const socket of sockets) {
      const state = this.states.get(socket);
      if (!state) continue;
      const cursor = state.cursor;
      const next = cursor !== undefined && (event.previous === undefined ? compareEventIds(cursor, event.id) < 0 : cursor === event.previous);
      if (!state.reading && next) this.write(chatId, socket, state, event.id, event.payload);
      else this.read(chatId, socket, state);
    }
  }

  /** The chat's log has something new: these sockets read it. */
  wake(chatId: string, sockets: WebSocket[]): void {
    for (const socket of sockets) {
      const state = this.states.get(socket);
      if (state) this.read(chatId, socket, state);
    }
  }

  /**
   * One read at a time per socket; a wake-up during one makes another after it. A read that fails
   * (Redis away) is tried again until one succeeds while the socket is open: the event that woke it
   * may be the chat's last, and no other would come to bring it.
   */
  private read(chatId: string, socket: WebSocket, state: SocketState): void {
    if (state.reading) {
      state.again = true;
      return;
    }
    clearTimeout(state.retry);
    state.retry = undefined;
    state.reading = true;
    void (async () => {
      let failed = false;
      do {
        state.again = false;
        try {
          const { events, cursor } = await this.events.since(chatId, state.cursor);
          for (const logged of events) this.write(chatId, socket, state, logged.id, logged.payload);
          state.cursor = cursor;
          failed = false;
        } catch (error) {
          failed = true;
          this.logger.warn({ err: error, chatId }, "could not read a web chat's kept replies; reading again shortly");
        }
      } while (state.again && socket.readyState === socket.OPEN);
      state.reading = false;
      if (!failed) state.retryMs = RETRY_FIRST_MS;
      else if (socket.readyState === socket.OPEN) this.readLater(chatId, socket, state);
    })();
  }

  private readLater(chatId: string, socket: WebSocket, state: SocketState): void {
    const delay = state.retryMs;
    state.retryMs = Math.min(delay * 2, RETRY_MAX_MS);
    state.retry = setTimeout(() => {
      state.retry = undefined;
      if (socket.readyState === socket.OPEN) this.read(chatId, socket, state);
    }, delay);
    state.retry.unref();
  }

  private write(chatId: string, socket: WebSocket, state: SocketState, seq: string, payload: string): void {
    state.cursor = seq;
    const event = parseEvent(payload);
    if (!event) return;
    const key = `${event.type}:${event.id}#${event.part ?? 0}`;
    if (state.sent.has(key)) {
      this.markDelivered(chatId, seq);
      return;
    }
    if (socket.readyState !== socket.OPEN) return;
    state.sent.add(key);
    if (state.sent.size > MAX_REMEMBERED) state.sent.delete(state.sent.values().next().value!);
    // Not awaited: one slow client must not hold up every chat. A failed write leaves the event
    // undelivered in the log, for the page's next socket.
    socket.send(JSON.stringify({ ...event, seq }), (error) => {
      if (!error) this.markDelivered(chatId, seq);
    });
  }

  private markDelivered(chatId: string, seq: string): void {
    this.events.markDelivered(chatId, seq).catch((error: unknown) => this.logger.warn({ err: error, chatId }, "could not mark a web reply delivered"));
  }
}

interface KeptEvent {
  type: "message" | "notice";
  id: string;
  part?: number;
}

function parseEvent(payload: string): KeptEvent | undefined {
  try {
    const event = JSON.parse(payload) as KeptEvent;
    return event && (event.type === "message" || event.type === "notice") && typeof event.id === "string" ? event : undefined;
  } catch {
    return undefined; // not ours
  }
}
