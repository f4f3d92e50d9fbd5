/**
 * The WeCom intelligent robot (智能机器人) as a ChannelAdapter, over its long connection
 * (robot-connection.ts, WeCom's SDK): one-to-one chats and groups.
 *
 * - Inbound: each message frame, deduped on its msgid, each chat's in order, handed to the sink
 *   again when it failed to take it (robot-inbound.ts, robot-message.ts).
 * - Outbound: a reply streams into a `stream` message answering the user's message, updated in
 *   place and finished with the final text (robot-stream.ts); the first final of a chat whose
 *   message was not answered by a stream answers it as a finished stream; anything else (split
 *   parts, background results) is pushed as Markdown (`aibot_send_msg`, at most 4096 bytes).
 * - Errors: WeCom's acknowledgement errcodes, mapped as the server API's (wecom-errors.ts).
 */
import type { WsFrame } from "@wecom/aibot-node-sdk";
import type { Logger } from "pino";
import { ChannelError } from "../../src/errors.js";
import type { ChannelAdapter, Scrub } from "../../src/gateway/kit/index.js";
import { ROBOT_MAX_MESSAGE_BYTES, MIN_SEND_INTERVAL_MS } from "./quotas.js";
import { renderWeComMarkdown, wecomRenderedBytes } from "./render-markdown.js";
import { type RobotConnection, createRobotConnection } from "./robot-connection.js";
import { createRobotInbound } from "./robot-inbound.js";
import { STREAM_PREFIX, createRobotStreams, streamIdOf } from "./robot-stream.js";
import type { WeComScrubber } from "./wecom-errors.js";
import { toChannelError } from "./wecom-errors.js";

export interface WeComRobotAdapterOptions {
  botId: string;
  /** Secret: never logged. */
  secret: string;
  wsUrl: string;
  robotName?: string;
  settleMs: number;
  scrubber: WeComScrubber;
  logger: Logger;
  now?: () => number;
  /** Messages older than this are dropped. Default 12 h. */
  maxEventAgeMs?: number;
}

const HOUR_MS = 60 * 60_000;
const MAX_CHATS = 10_000;

/** Runs one call of the robot, its failure mapped onto a ChannelError without a secret in it. */
async function guarded<T>(operation: string, scrub: Scrub, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw toChannelError(error, operation, scrub);
  }
}

interface Replies {
  /** The newest message of each chat not answered yet: a stream answers it. */
  unanswered: Map<string, WsFrame>;
  streams: ReturnType<typeof createRobotStreams>;
  live(): RobotConnection;
  scrub: Scrub;
  now(): number;
}

/** A draft opens a stream on the chat's unanswered message; a final answers it whole; anything else is pushed. */
async function sendReply(replies: Replies, chatId: string, text: string, key: string | undefined): Promise<string> {
  const { unanswered, streams, live, scrub } = replies;
  const frame = unanswered.get(chatId);
  if (key?.endsWith("#draft")) {
    if (!frame) throw new ChannelError("wecom: no message in hand to stream a reply to in this chat", "wecom");
    unanswered.delete(chatId);
    return guarded("aibot_respond_msg", scrub, () => streams.open(frame, key, text));
  }
  if (frame) {
    // The first final of an unanswered message answers it, as a finished stream.
    unanswered.delete(chatId);
    const streamId = streamIdOf(key ?? `${chatId}:${replies.now()}`);
    await guarded("aibot_respond_msg", scrub, () => live().replyStream(frame, streamId, text, true));
    return `reply:${streamId}`;
  }
  await guarded("aibot_send_msg", scrub, () => live().push(chatId, { msgtype: "markdown", markdown: { content: text } }));
  return `push:${streamIdOf(`${chatId}:${replies.now()}:${Math.random()}`)}`;
}

export function createWeComRobotAdapter(options: WeComRobotAdapterOptions): ChannelAdapter {
  const { logger } = options;
  const now = options.now ?? Date.now;
  const scrub = options.scrubber.scrub;
  const unanswered = new Map<string, WsFrame>();
  const listeners = new Set<(change: { connected: boolean; reason?: string }) => void>();
  let connection: RobotConnection | undefined;
  const inbound = createRobotInbound({
    ...(options.robotName ? { robotName: options.robotName } : {}),
    logger,
    now,
    maxEventAgeMs: options.maxEventAgeMs ?? 12 * HOUR_MS,
    remember(chatId, frame) {
      unanswered.delete(chatId);
      unanswered.set(chatId, frame);
      if (unanswered.size > MAX_CHATS) unanswered.delete(unanswered.keys().next().value!);
    },
  });

  const live = () => {
    if (!connection) throw new ChannelError("the WeCom robot is not running", "wecom", { kind: "network" });
    return connection;
  };
  const streams = createRobotStreams({ connection: { replyStream: (...args) => live().replyStream(...args) }, settleMs: options.settleMs, logger });
  const replies: Replies = { unanswered, streams, live, scrub, now };

  return {
    name: "wecom",
    capabilities: { maxMessageLength: ROBOT_MAX_MESSAGE_BYTES, streaming: "edit", draftIntervalMs: 1_000, minSendIntervalMs: MIN_SEND_INTERVAL_MS },
    render: renderWeComMarkdown,
    measure: wecomRenderedBytes,
    botUsername: () => options.robotName,
    watchConnection(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },

    async start(eventSink) {
      if (connection) throw new ChannelError("the WeCom robot is already running", "wecom");
      inbound.open(eventSink);
      const opened = createRobotConnection({
        botId: options.botId,
        secret: options.secret,
        wsUrl: options.wsUrl,
        logger,
        scrub,
        onFrame: inbound.onFrame,
        onConnection: (change) => listeners.forEach((listener) => listener(change)),
      });
      await opened.start();
      connection = opened;
      logger.info({ channel: "wecom", mode: "robot" }, "wecom channel started");
    },

    async stop() {
      if (!connection) return;
      await inbound.close();
      await streams.settleAll();
      await connection.stop();
      connection = undefined;
      logger.info({ channel: "wecom" }, "wecom channel stopped");
    },

    async send(chatId, text, sendOptions) {
      return { platformMessageId: await sendReply(replies, chatId, text, sendOptions.idempotencyKey) };
    },

    async edit(chatId, platformMessageId, text, sendOptions) {
      const updated = platformMessageId.startsWith(STREAM_PREFIX) && (await guarded("aibot_respond_msg", scrub, () => streams.update(platformMessageId, text, sendOptions.outbound !== undefined)));
      if (!updated) throw new ChannelError(`wecom cannot edit ${platformMessageId} in ${chatId}: only an open stream is updated`, "wecom", { kind: "not-found" });
    },

    async finishStream(_chatId, platformMessageId, text) {
      if (platformMessageId.startsWith(STREAM_PREFIX)) await guarded("aibot_respond_msg", scrub, () => streams.settle(platformMessageId, text));
    },

    async typing() {
      // The robot shows no typing indicator; its stream shows the reply growing.
    },
  };
}
