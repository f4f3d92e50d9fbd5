/**
 * Slack's message events and slash commands, normalized into PlatformEvents.
 *
 * - Chat: a DM (`D…`, `private`), a channel, private channel or group DM (`group`), or a thread:
 *   `<channel>:<thread_ts>` (chat-id.ts), a `thread` of its own whose messages name the channel
 *   as `metadata.parentChatId` when threads inherit (a DM's thread stays `private`).
 * - Sender: the member id (`U…`), named by users.info; the channel is a scope (`channel:<id>`),
 *   so allowChannels lets its members in, its threads included.
 * - Mentions, from Slack's structure only: an `app_mention` event, or the `<@BOT_ID>` token Slack
 *   puts in the text for the bot's user id (from auth.test). `<@U…>` tokens become `@Name`, the
 *   bot's own `@<bot name>` (which admission strips when it leads); a user group `@Team`, a
 *   channel `#name`, a link its URL. So `@Reviewers check this` reaches the team trigger as typed.
 * - repliesToBot: a thread the bot started (`parent_user_id`) or answered in.
 * - `eventId` is `<channel>:<ts>`: the same message delivered as `message` and as `app_mention`,
 *   or delivered again, is one event.
 */
import type { Media } from "../../src/bus/message.js";
import type { PlatformEvent } from "../../src/gateway/kit/index.js";
import { chatIdOf, isDirect } from "./chat-id.js";
import type { DownloadResult } from "./file-download.js";
import type { MessageEvent, SlackFile, SlashCommand } from "./payloads.js";

export interface InboundContext {
  botUserId: string;
  botName: string;
  /** A member's display name (cached); undefined when Slack would not say. */
  nameOf(userId: string): Promise<string | undefined>;
  download(file: SlackFile, signal: AbortSignal): Promise<DownloadResult>;
  /** Whether the bot posted into this thread chat. */
  answeredIn(chatId: string): boolean;
  /**
   * The message a thread started from, the first time this thread is asked for (undefined after
   * that, and for a thread the bot started): the model then knows what the thread is about.
   */
  threadStart(chatId: string): Promise<{ text: string; userId?: string } | undefined>;
  inheritParent: boolean;
  /** Download the files of channel messages not addressed to the bot too (`groupPolicy: "all"`). */
  filesUnaddressed: boolean;
  now(): number;
}

/** The message's identity: the same for its `message` and `app_mention` events. */
export const messageKeyOf = (event: Pick<MessageEvent, "channel" | "ts">) => `${event.channel}:${event.ts}`;

const MENTION = /<@([UW][A-Z0-9]+)(?:\|([^>]*))?>/g;

export function mentionsBot(event: MessageEvent, botUserId: string): boolean {
  if (event.type === "app_mention") return true;
  return [...event.text.matchAll(MENTION)].some((match) => match[1] === botUserId);
}

/** Slack's text as a person reads it: mentions by name, links as their URL, entities unescaped. */
export async function readableText(text: string, context: Pick<InboundContext, "botUserId" | "botName" | "nameOf">): Promise<string> {
  const names = new Map<string, string>();
  for (const match of text.matchAll(MENTION)) {
    const id = match[1]!;
    if (names.has(id)) continue;
    names.set(id, id === context.botUserId ? context.botName : (match[2] || (await context.nameOf(id)) || id));
  }
  return text
    .replace(MENTION, (_token, id: string) => `@${names.get(id) ?? id}`)
    .replace(/<!subteam\^[A-Z0-9]+\|@?([^>]+)>/g, "@$1")
    .replace(/<!subteam\^([A-Z0-9]+)>/g, "@$1")
    .replace(/<!(here|channel|everyone)(?:\|[^>]*)?>/g, "@$1")
    .replace(/<#[CG][A-Z0-9]+\|([^>]*)>/g, "#$1")
    .replace(/<#([CG][A-Z0-9]+)>/g, "#$1")
    .replace(/<((?:https?|mailto):[^|>]+)\|([^>]+)>/g, (_token, url: string, label: string) => (label === url || `mailto:${label}` === url ? label : `${label} (${url})`))
    .replace(/<((?:https?|mailto):[^>]+)>/g, "$1")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&")
    .trim();
}

/** Where a message belongs: its chat, the chat's type, and the thread's parent channel. */
export function placeOf(event: MessageEvent): { chatId: string; chatType: PlatformEvent["chatType"]; parent?: string } {
  const direct = event.channel_type === "im" || isDirect(event.channel);
  const inThread = event.thread_ts !== undefined && event.thread_ts !== event.ts;
  if (!inThread) return { chatId: event.channel, chatType: direct ? "private" : "group" };
  return { chatId: chatIdOf(event.channel, event.thread_ts), chatType: direct ? "private" : "thread", parent: event.channel };
}

/** Builds the event of one message; downloads its files first. Rejects only when `signal` aborts. */
export async function toPlatformEvent(event: MessageEvent, context: InboundContext, signal: AbortSignal): Promise<PlatformEvent> {
  const place = placeOf(event);
  const senderIsBot = event.bot_id !== undefined || event.subtype === "bot_message";
  const mentioned = mentionsBot(event, context.botUserId);
  const repliesToBot = place.chatType === "thread" && (event.parent_user_id === context.botUserId || context.answeredIn(place.chatId));
  const media: Media[] = [];
  const notes: string[] = [];
  // Bots are never answered, nor (under mention gating) channel chatter: no point fetching their files.
  const addressed = place.chatType === "private" || mentioned || repliesToBot || context.filesUnaddressed;
  for (const file of senderIsBot || !addressed ? [] : (event.files ?? [])) {
    const result = await context.download(file, signal);
    if ("media" in result) media.push(result.media);
    else notes.push(result.note);
  }
  const senderId = event.user ?? event.bot_id ?? "unknown";
  const senderName = event.user ? await context.nameOf(event.user) : undefined;
  const note = addressed && !senderIsBot && event.thread_ts ? await threadNote(event, place.chatId, context) : undefined;
  const text = [await readableText(event.text, context), note].filter((part) => part).join("\n\n");
  return {
    eventId: messageKeyOf(event),
    chatId: place.chatId,
    chatType: place.chatType,
    senderId,
    ...(senderName ? { senderName } : {}),
    senderIsBot,
    ...(place.chatType === "private" ? {} : { scopes: [`channel:${event.channel}`] }),
    text: [text, ...notes].filter((part) => part.length > 0).join("\n\n"),
    mentionsBot: mentioned,
    repliesToBot,
    platformMessageId: event.ts,
    media,
    receivedAt: context.now(),
    metadata: {
      slackChannel: event.channel,
      ...(place.parent && context.inheritParent ? { parentChatId: place.parent } : {}),
      ...(event.team ? { slackTeam: event.team } : {}),
    },
  };
}

const MAX_PARENT_CHARACTERS = 2_000;

/** `(This thread started from a message by Alice: "…")`, once per thread, when it started from someone else's message. */
async function threadNote(event: MessageEvent, chatId: string, context: InboundContext): Promise<string | undefined> {
  if (event.thread_ts === undefined || event.thread_ts === event.ts) return undefined;
  const parent = await context.threadStart(chatId);
  if (!parent || parent.text.trim() === "") return undefined;
  const said = await readableText(parent.text, context);
  const by = parent.userId ? ((await context.nameOf(parent.userId)) ?? parent.userId) : "someone";
  const quoted = said.length > MAX_PARENT_CHARACTERS ? `${said.slice(0, MAX_PARENT_CHARACTERS)}…` : said;
  return `(This thread started from a message by ${by}: "${quoted}")`;
}

/** The event of a slash command: `/new`, `/stop`, or `/team <name> <goal>` as if typed. */
export function slashCommandEvent(command: SlashCommand, now: number): PlatformEvent {
  const direct = isDirect(command.channel_id);
  return {
    eventId: `slash:${command.trigger_id}`,
    chatId: command.channel_id,
    chatType: direct ? "private" : "group",
    senderId: command.user_id,
    ...(command.user_name ? { senderName: command.user_name } : {}),
    senderIsBot: false,
    ...(direct ? {} : { scopes: [`channel:${command.channel_id}`] }),
    text: `${command.command} ${command.text}`.trim(),
    // A slash command is addressed to this app by construction.
    mentionsBot: true,
    repliesToBot: false,
    platformMessageId: `slash:${command.trigger_id}`,
    media: [],
    receivedAt: now,
    metadata: { slackChannel: command.channel_id },
  };
}
