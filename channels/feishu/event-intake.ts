/**
 * Where Feishu's events come in, from either path (long connection or webhook): only
 * `im.message.receive_v1`, parsed once; redeliveries (in-flight and recent message ids and event
 * ids) and messages older than `maxEventAgeMs` are dropped before anything is downloaded; each
 * chat's events reach the sink one at a time, in order. `receive` resolves when the event may be
 * acknowledged: once the sink took it, or after `ackBudgetMs` while a slow download goes on
 * (tracked, so stop() waits for it), which keeps within Feishu's 3 s.
 */
import type { Logger } from "pino";
import { type EventSink, ExpiringSet, KeyedLanes } from "../../src/gateway/kit/index.js";
import { errorMessage } from "../../src/errors.js";
import { MESSAGE_RECEIVED, type MessageEvent, MessageEventSchema } from "./event-schema.js";
import { type BotIdentity, toPlatformEvent } from "./inbound-event.js";
import type { SenderNames } from "./sender-names.js";
import type { createResourceDownloader } from "./resource-download.js";

const DAY_MS = 24 * 60 * 60 * 1000;

export interface EventIntakeOptions {
  groupSessionScope: "chat" | "thread";
  download: ReturnType<typeof createResourceDownloader>["download"];
  senderNames: SenderNames;
  /** Messages the bot sent: a reply to one of them is a reply to the bot. */
  sentByBot: ExpiringSet;
  /** User messages that were in a thread: a reply to one stays in the thread. */
  inThread: ExpiringSet;
  logger: Logger;
  now: () => number;
  ackBudgetMs: number;
  maxEventAgeMs: number;
}

export class EventIntake {
  identity: BotIdentity | undefined;
  sink: EventSink | undefined;
  /** Aborted on stop: events still downloading are not handed on. */
  lifetime = new AbortController();
  /** Message ids (and event ids) published recently, or in flight: a redelivery is dropped before it downloads anything. */
  private readonly recent: ExpiringSet;
  private readonly taking = new Set<string>();
  /** In-flight events, so stop() waits for them; and each chat's tail, so a chat's events stay in order. */
  private readonly inFlight = new Set<Promise<void>>();
  private readonly chats = new KeyedLanes();

  constructor(private readonly options: EventIntakeOptions) {
    this.recent = new ExpiringSet(DAY_MS / 24, options.now);
  }

  /** Resolves once every event taken so far is handed on (or failed). */
  async drain(): Promise<void> {
    await Promise.all(this.inFlight);
  }

  /** Takes one event from either path; resolves when it may be acknowledged. */
  readonly receive = async (raw: Record<string, unknown>): Promise<void> => {
    const { logger, now } = this.options;
    if (raw.event_type !== MESSAGE_RECEIVED) return;
    const parsed = MessageEventSchema.safeParse(raw);
    if (!parsed.success) {
      logger.warn({ channel: "feishu", eventId: raw.event_id, error: parsed.error.issues[0]?.message }, "feishu event not understood; skipped");
      return;
    }
    const event = parsed.data;
    const { message } = event;
    const fields = { channel: "feishu", messageId: message.message_id, eventId: event.event_id };
    const ids = [message.message_id, `event:${event.event_id}`];
    if (ids.some((id) => this.recent.has(id) || this.taking.has(id))) return logger.debug(fields, "feishu event redelivered; dropped");
    const createdAt = Number(message.create_time ?? event.create_time);
    if (Number.isFinite(createdAt) && now() - createdAt > this.options.maxEventAgeMs) {
      return logger.warn({ ...fields, ageMs: now() - createdAt }, "feishu message too old to answer; dropped");
    }
    if (message.thread_id) this.options.inThread.add(message.message_id);
    await this.withinAckBudget(this.track(event, ids), fields);
  };

  /** Runs the event in its chat's lane; done, its ids are remembered; failed, forgotten, so that Feishu's redelivery is taken. */
  private track(event: MessageEvent, ids: string[]): Promise<void> {
    for (const id of ids) this.taking.add(id);
    const signal = this.lifetime.signal;
    const work = this.chats.run(event.message.chat_id, () => this.handOn(event, signal));
    const tracked = work
      .then(() => ids.forEach((id) => this.recent.add(id)), () => undefined)
      .finally(() => {
        for (const id of ids) this.taking.delete(id);
        this.inFlight.delete(tracked);
      });
    this.inFlight.add(tracked);
    return work;
  }

  /** Waits for the work, or for the acknowledgement budget; work still running then is logged when it fails. */
  private async withinAckBudget(work: Promise<void>, fields: Record<string, unknown>): Promise<void> {
    const { logger } = this.options;
    let timer: NodeJS.Timeout | undefined;
    const budget = new Promise<"budget">((resolve) => {
      timer = setTimeout(() => resolve("budget"), this.options.ackBudgetMs);
    });
    try {
      const outcome = await Promise.race([work.then(() => "done" as const), budget]);
      if (outcome === "budget") {
        logger.info(fields, "feishu event still in progress; acknowledged to keep within Feishu's 3 s");
        work.catch((error: unknown) => logger.error({ ...fields, error: errorMessage(error) }, "feishu event failed after its acknowledgement"));
      }
    } finally {
      clearTimeout(timer);
    }
  }

  private async handOn(event: MessageEvent, signal: AbortSignal): Promise<void> {
    const { sentByBot, now } = this.options;
    const platformEvent = await toPlatformEvent(
      event,
      { bot: this.identity, scope: this.options.groupSessionScope, download: this.options.download, sentByBot: (id) => sentByBot.has(id), now },
      signal,
    );
    if (platformEvent.chatType !== "private" && !platformEvent.senderIsBot) {
      const name = await this.options.senderNames.nameOf(platformEvent.senderId);
      if (name) platformEvent.senderName = name;
    }
    if (signal.aborted || !this.sink) return;
    const outcome = await this.sink(platformEvent);
    this.options.logger.debug({ channel: "feishu", chatId: platformEvent.chatId, messageId: event.message.message_id, eventId: event.event_id, outcome }, "feishu event handled");
  }
}
