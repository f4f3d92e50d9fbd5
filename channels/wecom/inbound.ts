/**
 * Application messages on their way to the sink: normalized into PlatformEvents, each chat's in
 * order, each MsgId once.
 *
 * - Chat: a one-to-one chat with the application is the member's UserID (`FromUserName`); an
 *   application receives no group messages (a group is reached through the intelligent robot).
 * - Content: text; image, voice, video and file downloaded by their MediaId (capped); a voice
 *   note's transcript (`Recognition`) when WeCom adds it; a link or location as a line of text;
 *   events (entering the application, menus) are not messages and are skipped.
 * - Dedupe: WeCom calls a callback again when it had no answer in 5 s (three times in all). The
 *   callback answers at once, but a retry may still come: a MsgId taken in the last hour is dropped
 *   before it downloads anything; one in flight is not taken twice. The bus dedupes the event id
 *   (the MsgId) too, across gateways and restarts.
 * - A message older than `maxEventAgeMs` is dropped: the bus's `seen:` key for it may be gone.
 */
import type { Logger } from "pino";
import type { Media } from "../../src/bus/message.js";
import { ChannelError } from "../../src/errors.js";
import { type EventSink, ExpiringSet, KeyedLanes, type PlatformEvent } from "../../src/gateway/kit/index.js";
import type { AppMessage } from "./callback-xml.js";
import type { Attachment, DownloadResult } from "./media-download.js";

export interface InboundOptions {
  download(attachment: Attachment, signal: AbortSignal): Promise<DownloadResult>;
  logger: Logger;
  now: () => number;
  maxEventAgeMs: number;
}

export interface Inbound {
  receive(message: AppMessage): Promise<void>;
  open(sink: EventSink): void;
  /** Waits for the messages in flight, then lets nothing more through. */
  close(): Promise<void>;
}

const HOUR_MS = 60 * 60_000;

function contentOf(message: AppMessage): { text: string; attachments: Attachment[] } {
  const mediaId = message.MediaId;
  switch (message.MsgType) {
    case "text":
      return { text: (message.Content ?? "").trim(), attachments: [] };
    case "image":
      return { text: "", attachments: mediaId ? [{ mediaId, type: "image", label: "image" }] : [] };
    case "voice": {
      const said = message.Recognition?.trim();
      return { text: said ? `[voice message] ${said}` : "[a voice message]", attachments: mediaId ? [{ mediaId, type: "voice", label: "voice message" }] : [] };
    }
    case "video":
      return { text: "[a video]", attachments: mediaId ? [{ mediaId, type: "video", label: "video" }] : [] };
    case "file": {
      const name = message.FileName || message.Title;
      const label = name ? `file "${name}"` : "file";
      return { text: `[${label}]`, attachments: mediaId ? [{ mediaId, type: "file", label, ...(name ? { name } : {}) }] : [] };
    }
    case "link":
      return { text: `[link] ${message.Title ?? ""} ${message.Url ?? ""}`.trim(), attachments: [] };
    case "location":
      return { text: `[location] ${message.Label ?? ""}`.trim(), attachments: [] };
    default:
      return { text: `[a ${message.MsgType} message]`, attachments: [] };
  }
}

async function toPlatformEvent(message: AppMessage & { MsgId: string }, options: InboundOptions, signal: AbortSignal): Promise<PlatformEvent> {
  const content = contentOf(message);
  const media: Media[] = [];
  const notes: string[] = [];
  for (const attachment of content.attachments) {
    const result = await options.download(attachment, signal);
    if ("media" in result) media.push(result.media);
    else notes.push(result.note);
  }
  return {
    eventId: message.MsgId,
    chatId: message.FromUserName,
    chatType: "private",
    senderId: message.FromUserName,
    senderIsBot: false,
    text: [content.text, ...notes].filter((part) => part.length > 0).join("\n\n"),
    mentionsBot: false,
    repliesToBot: false,
    platformMessageId: message.MsgId,
    media,
    receivedAt: options.now(),
    metadata: { wecomAgentId: message.AgentID ?? "" },
  };
}

export function createInbound(options: InboundOptions): Inbound {
  const { logger, now } = options;
  const recent = new ExpiringSet(HOUR_MS, now);
  const taking = new Map<string, Promise<void>>();
  const chats = new KeyedLanes();
  let sink: EventSink | undefined;
  let lifetime = new AbortController();

  async function handOn(message: AppMessage & { MsgId: string }, signal: AbortSignal): Promise<void> {
    const event = await toPlatformEvent(message, options, signal);
    if (signal.aborted || !sink) throw new ChannelError("the WeCom channel stopped before the message was taken", "wecom");
    const outcome = await sink(event);
    logger.debug({ channel: "wecom", chatId: event.chatId, messageId: message.MsgId, outcome }, "wecom message handled");
  }

  function receive(message: AppMessage): Promise<void> {
    const msgId = message.MsgId;
    if (message.MsgType === "event" || !msgId) {
      logger.debug({ channel: "wecom", type: message.MsgType, event: message.Event }, "wecom event skipped");
      return Promise.resolve();
    }
    const fields = { channel: "wecom", messageId: msgId };
    if (recent.has(msgId)) {
      logger.info(fields, "wecom message delivered again; dropped");
      return Promise.resolve();
    }
    const inFlight = taking.get(msgId);
    if (inFlight) {
      logger.info(fields, "wecom message delivered again while being taken; dropped");
      return inFlight;
    }
    const ageMs = now() - Number(message.CreateTime) * 1000;
    if (ageMs > options.maxEventAgeMs) {
      logger.warn({ ...fields, ageMs }, "wecom message too old to answer; dropped");
      return Promise.resolve();
    }
    const signal = lifetime.signal;
    const work = chats.run(message.FromUserName, () => handOn({ ...message, MsgId: msgId }, signal));
    taking.set(msgId, work);
    void work
      .then(
        () => recent.add(msgId),
        () => undefined,
      )
      .finally(() => taking.delete(msgId));
    return work;
  }

  return {
    receive,
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
