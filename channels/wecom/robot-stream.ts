/**
 * Streamed replies of the intelligent robot: a reply to a user's message is a `stream` message
 * (`aibot_respond_msg` with the message's req_id) whose every update carries the whole text so far
 * under the same stream id, until one says `finish: true`. WeCom shows it growing in place.
 *
 * - open: the first draft of a reply opens a stream on the newest unanswered message of its chat
 *   (a chat with none cannot stream: its reply is pushed whole). The stream id is derived from the
 *   dispatcher's idempotency key, so a retried open names the same stream;
 * - update: a draft replaces the text; the final text (or `settle`, the dispatcher's finishStream)
 *   finishes it;
 * - a stream no update reached for `settleMs` (a turn that failed) is finished with its text.
 * Each stream's updates go out one after the other (the SDK also queues them per req_id).
 */
import { createHash } from "node:crypto";
import type { WsFrame } from "@wecom/aibot-node-sdk";
import type { Logger } from "pino";
import { errorMessage } from "../../src/errors.js";
import { KeyedLanes } from "../../src/gateway/kit/index.js";
import type { RobotConnection } from "./robot-connection.js";

export const STREAM_PREFIX = "stream:";

interface Stream {
  frame: WsFrame;
  text: string;
  timer?: NodeJS.Timeout;
}

export function streamIdOf(idempotencyKey: string): string {
  return `countbot-${createHash("sha256").update(idempotencyKey).digest("hex").slice(0, 32)}`;
}

export function createRobotStreams(options: { connection: Pick<RobotConnection, "replyStream">; settleMs: number; logger: Logger }) {
  const { connection, logger } = options;
  const streams = new Map<string, Stream>();
  const lanes = new KeyedLanes();

  async function finish(streamId: string, text: string): Promise<void> {
    const stream = streams.get(streamId);
    if (!stream) return;
    clearTimeout(stream.timer);
    await connection.replyStream(stream.frame, streamId, text, true);
    streams.delete(streamId);
  }

  function settleLater(streamId: string, stream: Stream): void {
    clearTimeout(stream.timer);
    stream.timer = setTimeout(() => {
      void lanes.run(streamId, () => finish(streamId, stream.text)).catch((error: unknown) => {
        logger.warn({ channel: "wecom", streamId, error: errorMessage(error) }, "wecom stream not finished");
      });
    }, options.settleMs);
    stream.timer.unref();
  }

  return {
    has: (platformMessageId: string) => streams.has(platformMessageId.slice(STREAM_PREFIX.length)),
    /** Opens a stream answering `frame`; resolves with its platform message id. */
    async open(frame: WsFrame, idempotencyKey: string, text: string): Promise<string> {
      const streamId = streamIdOf(idempotencyKey);
      await lanes.run(streamId, async () => {
        const stream: Stream = streams.get(streamId) ?? { frame, text };
        await connection.replyStream(frame, streamId, text, false);
        stream.text = text;
        streams.set(streamId, stream);
        settleLater(streamId, stream);
      });
      return `${STREAM_PREFIX}${streamId}`;
    },
    /** Replaces the text (`final`: and finishes the stream). */
    async update(platformMessageId: string, text: string, final: boolean): Promise<boolean> {
      const streamId = platformMessageId.slice(STREAM_PREFIX.length);
      return lanes.run(streamId, async () => {
        const stream = streams.get(streamId);
        if (!stream) return false;
        if (final) await finish(streamId, text);
        else {
          await connection.replyStream(stream.frame, streamId, text, false);
          stream.text = text;
          settleLater(streamId, stream);
        }
        return true;
      });
    },
    async settle(platformMessageId: string, text: string): Promise<void> {
      const streamId = platformMessageId.slice(STREAM_PREFIX.length);
      await lanes.run(streamId, () => finish(streamId, text));
    },
    async settleAll(): Promise<void> {
      await Promise.allSettled([...streams.entries()].map(([streamId, stream]) => lanes.run(streamId, () => finish(streamId, stream.text))));
    },
  };
}
