/**
 * Robot messages from either path (Stream frames, HTTP callbacks) on their way to the sink: each
 * chat's in order, each msgId once. A msgId taken in the last hour is dropped before it downloads
 * anything; one in flight makes its redelivery wait for it (and be acknowledged with it); one
 * that failed is forgotten, so that DingTalk's redelivery is taken. A message older than
 * `maxEventAgeMs` is dropped: the bus's `seen:` key for it may be gone.
 */
import type { Logger } from "pino";
import { ChannelError } from "../../src/errors.js";
import { type EventSink, ExpiringSet, KeyedLanes } from "../../src/gateway/kit/index.js";
import { chatIdOf } from "./chat-route.js";
import type { Attachment, DownloadResult } from "./file-download.js";
import { toPlatformEvent } from "./inbound-event.js";
import { type RobotMessage, RobotMessageSchema } from "./robot-message.js";

export interface InboundQueueOptions {
  download(attachment: Attachment, signal: AbortSignal): Promise<DownloadResult>;
  /** Sees every message taken, before its event is built (the session webhooks). */
  onMessage(message: RobotMessage): void;
  logger: Logger;
  now: () => number;
  maxEventAgeMs: number;
}

export interface InboundQueue {
  /** Resolves when the message may be acknowledged, rejects when it may not. */
  receive(message: RobotMessage): Promise<void>;
  /** A Stream frame's data; one that is no robot message is acknowledged and skipped. */
  receiveFrame(data: string): Promise<void>;
  open(sink: EventSink): void;
  /** Waits for the messages in flight, then lets nothing more through. */
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

  async function handOn(message: RobotMessage, signal: AbortSignal): Promise<void> {
    const event = await toPlatformEvent(message, { download: options.download, now }, signal);
    if (signal.aborted || !sink) throw new ChannelError("the DingTalk channel stopped before the message was taken", "dingtalk");
    const outcome = await sink(event);
    logger.debug({ channel: "dingtalk", chatId: event.chatId, messageId: message.msgId, outcome }, "dingtalk message handled");
  }

  function receive(message: RobotMessage): Promise<void> {
    const fields = { channel: "dingtalk", messageId: message.msgId };
    if (recent.has(message.msgId)) {
      logger.debug(fields, "dingtalk message redelivered; dropped");
      return Promise.resolve();
    }
    const inFlight = taking.get(message.msgId);
    if (inFlight) return inFlight;
    if (message.createAt !== undefined && now() - message.createAt > options.maxEventAgeMs) {
      logger.warn({ ...fields, ageMs: now() - message.createAt }, "dingtalk message too old to answer; dropped");
      return Promise.resolve();
    }
    options.onMessage(message);
    const signal = lifetime.signal;
    const work = chats.run(chatIdOf(message), () => handOn(message, signal));
    taking.set(message.msgId, work);
    void work
      .then(
        () => recent.add(message.msgId),
        () => undefined,
      )
      .finally(() => taking.delete(message.msgId));
    return work;
  }

  return {
    receive,
    async receiveFrame(data) {
      let raw: unknown;
      try {
        raw = JSON.parse(data) as unknown;
      } catch {
        raw = undefined;
      }
      const parsed = RobotMessageSchema.safeParse(raw);
      if (!parsed.success) {
        // Never understood, however often it came: acknowledged so that DingTalk stops sending it.
        logger.warn({ channel: "dingtalk", error: parsed.error.issues[0]?.message }, "dingtalk robot message not understood; skipped");
        return;
      }
      await receive(parsed.data);
    },
    open(next) {
      sink = next;
      lifetime = new AbortController();
    },
    async close() {
      await Promise.allSettled([...taking.values()]);
      lifetime.abort();
    },
  };
}
