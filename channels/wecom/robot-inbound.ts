/**
 * The robot's message frames on their way to the sink: each msgid once (an hour here, a day on the
 * bus), each chat's in order. The long connection has no acknowledgement of a message, so one the
 * sink failed to take is handed to it again here, with back-off, until the channel stops.
 */
import type { WsFrame } from "@wecom/aibot-node-sdk";
import type { Logger } from "pino";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { type EventSink, ExpiringSet, KeyedLanes, withRetries } from "../../src/gateway/kit/index.js";
import { RobotFrameBodySchema, robotChatIdOf, toRobotEvent } from "./robot-message.js";

export interface RobotInboundOptions {
  robotName?: string;
  logger: Logger;
  now: () => number;
  maxEventAgeMs: number;
  /** Told of each message before its event reaches the sink: the frame a reply streams on. */
  remember(chatId: string, frame: WsFrame): void;
}

const HOUR_MS = 60 * 60_000;

export function createRobotInbound(options: RobotInboundOptions) {
  const { logger, now } = options;
  const recent = new ExpiringSet(HOUR_MS, now);
  const lanes = new KeyedLanes();
  const taking = new Set<Promise<void>>();
  let sink: EventSink | undefined;
  let lifetime = new AbortController();

  function onFrame(frame: WsFrame): void {
    const parsed = RobotFrameBodySchema.safeParse(frame.body);
    if (!parsed.success) {
      logger.warn({ channel: "wecom", error: parsed.error.issues[0]?.message }, "wecom robot message not understood; skipped");
      return;
    }
    const body = parsed.data;
    if (recent.has(body.msgid)) {
      logger.info({ channel: "wecom", messageId: body.msgid }, "wecom robot message delivered again; dropped");
      return;
    }
    recent.add(body.msgid);
    if (body.create_time !== undefined && now() - body.create_time * 1000 > options.maxEventAgeMs) return;
    const chatId = robotChatIdOf(body);
    const signal = lifetime.signal;
    const work = lanes.run(chatId, async () => {
      options.remember(chatId, frame);
      const event = toRobotEvent(body, options.robotName, now());
      await withRetries(
        async () => {
          if (signal.aborted || !sink) throw new ChannelError("the WeCom robot stopped before the message was taken", "wecom");
          await sink(event);
        },
        { attempts: 5, baseDelayMs: 200, signal, retryable: () => !signal.aborted },
      );
    });
    taking.add(work);
    void work
      .catch((error: unknown) => logger.error({ channel: "wecom", messageId: body.msgid, error: errorMessage(error) }, "wecom robot message not taken"))
      .finally(() => taking.delete(work));
  }

  return {
    onFrame,
    open(next: EventSink) {
      sink = next;
      lifetime = new AbortController();
    },
    /** Waits for the messages in flight, then lets nothing more through. */
    async close() {
      await Promise.allSettled([...taking]);
      lifetime.abort();
      sink = undefined;
    },
  };
}
