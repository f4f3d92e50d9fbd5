/**
 * Events and slash commands from either path (Socket Mode envelopes, HTTP callbacks) on their way
 * to the sink. Slack wants every envelope acknowledged within 3 s, before any sink could be
 * trusted to answer, so taking one here never waits: it is checked, deduped and queued, and the
 * caller acknowledges it at once. Then, per chat in order, its files are downloaded and the event
 * is handed to the sink, tried again with back-off while the sink throws (Slack will not send an
 * acknowledged event again); one still not taken is dropped, and its sender told so.
 *
 * Duplicates, each answered once: an `event_id` seen in the last hour (Slack's retries, a
 * redelivered envelope), and the same message (`<channel>:<ts>`) arriving as both `message` and
 * `app_mention`. The event id the bus dedupes on across gateways and restarts is that message key.
 */
import type { Logger } from "pino";
import { errorMessage } from "../../src/errors.js";
import { type AdmissionOutcome, type EventSink, ExpiringSet, KeyedLanes, type PlatformEvent, sleep, withRetries } from "../../src/gateway/kit/index.js";
import { type InboundContext, messageKeyOf, placeOf, slashCommandEvent, toPlatformEvent } from "./inbound-event.js";
import { CONVERSATIONAL_SUBTYPES, type EventCallback, EventCallbackSchema, MessageEventSchema, type SlashCommand, SlashCommandSchema } from "./payloads.js";

export interface InboundQueueOptions {
  context: InboundContext;
  /** The bot's own bot id (auth.test), whose messages come back as events. */
  botId(): string | undefined;
  /** Tells a sender their message could not be taken. */
  notifyDropped(event: PlatformEvent): Promise<void>;
  logger: Logger;
  now: () => number;
  /** Events older than this are dropped, not answered. Default 12 h (the bus's dedupe holds for 24 h). */
  maxEventAgeMs?: number;
  /** First pause between hand-over attempts (doubled each time; five attempts). Default 500 ms. */
  handOverBackoffMs?: number;
  /** Longest wait for the queued events on close() before they are cut short. Default 15 s. */
  drainTimeoutMs?: number;
}

export interface InboundQueue {
  /** A Socket Mode envelope's payload (`events_api`, `slash_commands`; others are skipped); returns at once, throws when it is not what its type says. */
  envelope(type: string, body: unknown, retryAttempt?: number): void;
  /** An Events API callback; returns at once. */
  event(callback: EventCallback, retryAttempt?: number): void;
  /** A slash command; returns at once. */
  command(command: SlashCommand): void;
  open(sink: EventSink): void;
  /** Waits for the events queued (up to the drain timeout), then lets nothing more through. */
  close(): Promise<void>;
}

const HOUR_MS = 60 * 60_000;
const ATTEMPTS = 5;

/** Hands the event to the sink; tried again with back-off while it throws, as Slack will not send it again. */
async function deliver(event: PlatformEvent, sink: () => EventSink | undefined, options: InboundQueueOptions, signal: AbortSignal): Promise<AdmissionOutcome | undefined> {
  const { logger } = options;
  const fields = { channel: "slack", chatId: event.chatId, eventId: event.eventId };
  try {
    return await withRetries(
      () => {
        const take = sink();
        if (!take) throw new Error("the Slack channel is not running");
        return take(event);
      },
      {
        attempts: ATTEMPTS,
        baseDelayMs: options.handOverBackoffMs ?? 500,
        jitter: 0,
        signal,
        onRetry: (error, attempt) => logger.warn({ ...fields, attempt, error: errorMessage(error) }, "slack event hand-over failed; retrying"),
      },
    );
  } catch (error) {
    if (signal.aborted) return undefined;
    logger.error({ ...fields, attempts: ATTEMPTS, error: errorMessage(error) }, "slack event could not be handed over; dropped");
    if (event.chatType === "private" || event.mentionsBot || event.repliesToBot) {
      await options.notifyDropped(event).catch((notice: unknown) => logger.warn({ ...fields, error: errorMessage(notice) }, "could not tell the sender their message was dropped"));
    }
    return undefined;
  }
}

export function createInboundQueue(options: InboundQueueOptions): InboundQueue {
  const { logger, now, context } = options;
  const events = new ExpiringSet(HOUR_MS, now);
  const messages = new ExpiringSet(HOUR_MS, now);
  const chats = new KeyedLanes();
  const maxEventAgeMs = options.maxEventAgeMs ?? 12 * HOUR_MS;
  let sink: EventSink | undefined;
  let lifetime = new AbortController();

  function enqueue(chatId: string, build: (signal: AbortSignal) => Promise<PlatformEvent>): void {
    const signal = lifetime.signal;
    void chats
      .run(chatId, async () => {
        if (signal.aborted) return;
        const event = await build(signal);
        if (signal.aborted) return;
        const outcome = await deliver(event, () => sink, options, signal);
        logger.debug({ channel: "slack", chatId, eventId: event.eventId, outcome }, "slack event handled");
      })
      .catch((error: unknown) => {
        if (!signal.aborted) logger.error({ channel: "slack", chatId, error: errorMessage(error) }, "slack event could not be read; dropped");
      });
  }

  const queue: InboundQueue = {
    envelope(type, body, retryAttempt) {
      if (type === "events_api") {
        const parsed = EventCallbackSchema.safeParse(body);
        if (!parsed.success) throw new Error(`events_api envelope without an event callback: ${parsed.error.issues[0]?.message ?? "unreadable"}`);
        queue.event(parsed.data, retryAttempt);
      } else if (type === "slash_commands") {
        const parsed = SlashCommandSchema.safeParse(body);
        if (!parsed.success) throw new Error(`slash_commands envelope without a command: ${parsed.error.issues[0]?.message ?? "unreadable"}`);
        queue.command(parsed.data);
      }
    },
    event(callback, retryAttempt) {
      const fields = { channel: "slack", eventId: callback.event_id, ...(retryAttempt ? { retryAttempt } : {}) };
      if (!events.add(callback.event_id)) return void logger.debug(fields, "slack event delivered again; dropped");
      const parsed = MessageEventSchema.safeParse(callback.event);
      if (!parsed.success) return void logger.debug({ ...fields, type: callback.event.type }, "slack event of no interest; skipped");
      const message = parsed.data;
      if (!CONVERSATIONAL_SUBTYPES.has(message.subtype)) return;
      // Our own messages come back as events.
      if (message.user === context.botUserId || (message.bot_id !== undefined && message.bot_id === options.botId())) return;
      if (!messages.add(messageKeyOf(message))) return void logger.debug(fields, "slack message already taken (message and app_mention); dropped");
      if (callback.event_time !== undefined && now() - callback.event_time * 1000 > maxEventAgeMs) {
        return void logger.warn({ ...fields, ageMs: now() - callback.event_time * 1000 }, "slack event too old to answer; dropped");
      }
      enqueue(placeOf(message).chatId, (signal) => toPlatformEvent(message, context, signal));
    },
    command(command) {
      if (!events.add(`slash:${command.trigger_id}`)) return;
      enqueue(command.channel_id, async () => slashCommandEvent(command, now()));
    },
    open(next) {
      sink = next;
      lifetime = new AbortController();
    },
    async close() {
      const waiting = new AbortController();
      const timeout = sleep(options.drainTimeoutMs ?? 15_000, waiting.signal).then(
        () => false,
        () => false,
      );
      const drained = await Promise.race([chats.idle().then(() => true), timeout]);
      waiting.abort();
      if (!drained) logger.warn({ channel: "slack" }, "slack events still queued at stop; cut short");
      lifetime.abort();
      sink = undefined;
    },
  };
  return queue;
}
