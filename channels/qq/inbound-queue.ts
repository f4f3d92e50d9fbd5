/**
 * Message events from either path (the gateway's dispatches, webhook callbacks) on their way to the
 * sink: each chat's in order, each event id once. An id taken in the last hour is dropped at once
 * (a resumed session replays what it missed, QQ retries a callback it got no answer to); one in
 * flight makes its repeat wait for it. QQ's gateway never delivers an event twice on its own, so
 * an event the sink could not take is tried again here, with back-off, until it is taken or the
 * channel stops.
 */
import type { Logger } from "pino";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { type EventSink, ExpiringSet, KeyedLanes, type PlatformEvent, withRetries } from "../../src/gateway/kit/index.js";
import { type MessageEventType, toPlatformEvent } from "./events.js";

export interface InboundQueueOptions {
  logger: Logger;
  now: () => number;
  /** The bot's own user id (guild mentions), once known. */
  botId(): string | undefined;
  /** Sees every event taken, before the sink does (the reply window). */
  onEvent(event: PlatformEvent): void;
  /** First pause before the sink is asked again. Default 500 ms. */
  retryBaseMs?: number;
}

export interface InboundQueue {
  /** Resolves once the event was taken (or dropped as not understood or seen); rejects when the channel stopped first. */
  receive(type: MessageEventType, eventId: string | undefined, data: unknown): Promise<void>;
  open(sink: EventSink): void;
  /** Stops retrying, waits for the events in flight, then lets nothing more through. */
  close(): Promise<void>;
}

const HOUR_MS = 60 * 60_000;

export function createInboundQueue(options: InboundQueueOptions): InboundQueue {
  const { logger, now } = options;
  const recent = new ExpiringSet(HOUR_MS, now);
  const taking = new Map<string, Promise<void>>();
  const chats = new KeyedLanes();
  let sink: EventSink | undefined;
  let lifetime = new AbortController();

  async function handOn(event: PlatformEvent, signal: AbortSignal): Promise<void> {
    await withRetries(
      async () => {
        if (signal.aborted || !sink) throw new ChannelError("the QQ channel stopped before the event was taken", "qq");
        const outcome = await sink(event);
        logger.debug({ channel: "qq", chatId: event.chatId, eventId: event.eventId, outcome }, "qq event handled");
      },
      {
        signal,
        baseDelayMs: options.retryBaseMs ?? 500,
        maxDelayMs: 10_000,
        onRetry: (error, attempt) => logger.warn({ channel: "qq", eventId: event.eventId, attempt, error: errorMessage(error) }, "qq event not taken; trying again"),
      },
    );
  }

  return {
    receive(type, eventId, data) {
      const built = toPlatformEvent(type, eventId, data, { now: now(), ...(options.botId() ? { botId: options.botId()! } : {}) });
      if ("error" in built) {
        logger.warn({ channel: "qq", type, error: built.error }, "qq event not understood; skipped");
        return Promise.resolve();
      }
      const key = built.eventId;
      if (recent.has(key)) {
        logger.debug({ channel: "qq", eventId: key }, "qq event delivered again; dropped");
        return Promise.resolve();
      }
      const inFlight = taking.get(key);
      if (inFlight) return inFlight;
      options.onEvent(built);
      const signal = lifetime.signal;
      const work = chats.run(built.chatId, () => handOn(built, signal));
      taking.set(key, work);
      void work
        .then(
          () => recent.add(key),
          () => undefined,
        )
        .finally(() => taking.delete(key));
      return work;
    },
    open(next) {
      sink = next;
      lifetime = new AbortController();
    },
    async close() {
      lifetime.abort();
      await Promise.allSettled([...taking.values()]);
    },
  };
}
