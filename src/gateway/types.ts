/**
 * The ChannelAdapter contract: what a platform connector (Telegram, Discord, Feishu, web, CLI)
 * does. Adapters speak their platform's API and turn its payloads into PlatformEvents; everything
 * else (admission, commands, splitting, formatting fallback, pacing, retries, drafts) is shared
 * machinery in src/gateway. Core code never imports a platform SDK.
 */
import type { Media } from "../bus/message.js";
import type { AdmissionOutcome } from "./admission.js";

export interface ChannelCapabilities {
  /** Longest text one platform message may carry (Telegram: 4096). */
  maxMessageLength: number;
  /** How Markdown from the model is rendered: Telegram's HTML subset, Discord Markdown, Lark, or plain. */
  markdown: "telegram-html" | "discord" | "lark" | "plain";
  /**
   * How a reply streams: `draft` (Telegram sendMessageDraft, private chats), `edit` (one message
   * edited as text arrives), `none` (only the final is sent).
   */
  streaming: "draft" | "edit" | "none";
  /** Least time between two draft updates of one chat. */
  draftIntervalMs: number;
  /** Least time between two messages to one chat (the platform's per-chat limit). */
  minSendIntervalMs: number;
}

/** What a platform told us, normalized. Built by the adapter; judged by admission. */
export interface PlatformEvent {
  /** The platform's id for this event (Telegram update_id): inbound dedupe key. */
  eventId: string;
  chatId: string;
  chatType: "private" | "group";
  senderId: string;
  senderName?: string;
  senderIsBot: boolean;
  text: string;
  /** The bot was @mentioned (by username or a mention entity). */
  mentionsBot: boolean;
  /** The message replies to one of the bot's messages. */
  repliesToBot: boolean;
  /** The platform's id of this message, to thread the reply to it. */
  platformMessageId: string;
  media: Media[];
  receivedAt: number;
}

/**
 * Takes one event; resolves once admission is done with it, with what admission did (the shared
 * runtime's sink says; adapters that do not care ignore it).
 */
export type EventSink = (event: PlatformEvent) => Promise<AdmissionOutcome | void>;

export interface SendOptions {
  /** Platform message id to reply to (threading). */
  replyTo?: string;
  /** `formatted`: text is already rendered in the channel's markup; `plain`: send as is, no parsing. */
  format: "formatted" | "plain";
  /**
   * What this send carries, when the dispatcher was asked to say (`annotateSends`): for adapters
   * that show more than the text (the terminal). Absent on the gateway's own replies (pairing
   * code, rate-limit notice, `/stop`, `/help`) and on draft messages.
   */
  outbound?: OutboundPart;
}

/** One chunk of a bus message, as the dispatcher puts it on the platform. */
export interface OutboundPart {
  /** The bus message's id. A turn's reply carries the id its drafts streamed under (draftIdOf). */
  messageId: string;
  /** `final`: a reply (or a message the agent sent mid-turn); `notice`: a tool-call line. */
  kind: "final" | "notice";
  /** This chunk's index, and how many chunks the message was split into. */
  chunk: number;
  chunks: number;
  /**
   * The inbound message ids this message answers (its `metadata.answers`): set on the reply that
   * ends a turn, empty on notices and mid-turn messages.
   */
  answers: string[];
}

/**
 * A platform connector. Methods throw ChannelError (with `retryAfterMs` for rate limits and
 * `kind: "formatting"` when the platform rejects the markup).
 */
export interface ChannelAdapter {
  /** Channel name on the bus, e.g. `telegram`. */
  readonly name: string;
  readonly capabilities: ChannelCapabilities;
  /** Start receiving (polling or webhook); every event goes to `sink`, in order per chat. */
  start(sink: EventSink): Promise<void>;
  stop(): Promise<void>;
  /** Send a message; resolves with the platform's id of the message it created. */
  send(chatId: string, text: string, options: SendOptions): Promise<{ platformMessageId: string }>;
  /** Replace the text of a message sent before (edit-style streaming). */
  edit(chatId: string, platformMessageId: string, text: string, options: SendOptions): Promise<void>;
  /** Show a streaming draft (Telegram sendMessageDraft); only when capabilities.streaming is `draft`. */
  draft?(chatId: string, draftId: number, text: string): Promise<void>;
  /** Show "typing…". Best effort. */
  typing(chatId: string): Promise<void>;
}
