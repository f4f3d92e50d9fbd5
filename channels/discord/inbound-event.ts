/**
 * A Discord message (as discord.js built it from MESSAGE_CREATE), normalized into a PlatformEvent:
 * the chat type Discord says (DM, guild text channel, thread), whether the bot is addressed (its
 * user id or managed role in the mentions Discord computed, never the text, never @everyone or
 * @here; a reply to one of its messages), the scopes the allowlist may name (guild, channel, a thread's parent channel, roles),
 * and image and audio attachments downloaded as media (a voice message's recording as audio with
 * its duration, for the gateway to transcribe).
 */
import { ChannelType, type Message, MessageFlags, MessageType } from "discord.js";
import type { Media } from "../../src/bus/message.js";
import type { ChatType, PlatformEvent } from "../../src/gateway/kit/index.js";
import type { AttachmentDownloader, InboundAttachment } from "./attachment-download.js";

export interface InboundContext {
  /** The bot's user id (from READY). */
  botId: string;
  /** Threads: name the parent channel in `metadata.parentChatId`. */
  inheritParent: boolean;
  downloader: Pick<AttachmentDownloader, "collect">;
  now(): number;
}

/** A message the adapter cannot read (a payload discord.js let through with fields missing). */
export class UnreadableMessageError extends Error {
  override name = "UnreadableMessageError";
}

/** Messages people write; joins, pins, thread starters and other system messages are not for the agent. */
const conversational = new Set<MessageType>([MessageType.Default, MessageType.Reply]);

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

export function chatTypeOf(message: Message): ChatType {
  if (message.channel.type === ChannelType.DM || message.channel.type === ChannelType.GroupDM) return "private";
  return message.channel.isThread() ? "thread" : "group";
}

/** The bot's managed role in the message's guild: a mention of it addresses the bot too. */
function botRoleId(message: Message, botId: string): string | undefined {
  return message.guild?.roles.botRoleFor(botId)?.id;
}

interface Addressing {
  text: string;
  mentionsBot: boolean;
}

/**
 * Whether the message mentions the bot, read from the mentions Discord computed (`mentions`,
 * `mention_roles`), never from the text: an escaped `\<@bot>` or one inside inline code or a code
 * block is not a mention there, and so not here. The text loses the bot's own mentions only when
 * they are real; other users' and roles' mentions read as `@name`, the way the Discord client
 * shows them.
 */
export function addressing(message: Message, botId: string): Addressing {
  const roleId = botRoleId(message, botId);
  // A reply that pings the bot lists it among the mentions too: that is addressing by reply (repliesToBot).
  const mentionsBot = message.mentions.users.has(botId) || (roleId !== undefined && message.mentions.roles.has(roleId));
  const own = new RegExp(`\\s*<@!?${escapeRegExp(botId)}>[,:]?${roleId ? `|\\s*<@&${escapeRegExp(roleId)}>[,:]?` : ""}`, "g");
  const content = message.content;
  const text = (mentionsBot ? content.replace(own, "") : content)
    .replace(/(?<!\\)<@!?(\d+)>/g, (mention, id: string) => {
      const name = message.mentions.members?.get(id)?.displayName ?? message.mentions.users.get(id)?.displayName;
      return name ? `@${name}` : mention;
    })
    .replace(/(?<!\\)<@&(\d+)>/g, (mention, id: string) => {
      const role = message.mentions.roles.get(id);
      return role ? `@${role.name}` : mention;
    })
    .trim();
  return { text, mentionsBot };
}

function repliesToBot(message: Message, botId: string): boolean {
  if (!message.reference?.messageId) return false;
  if (message.mentions.repliedUser) return message.mentions.repliedUser.id === botId;
  return message.channel.messages.cache.get(message.reference.messageId)?.author?.id === botId;
}

function scopesOf(message: Message): string[] {
  if (!message.guildId) return [];
  const scopes = [`guild:${message.guildId}`, `channel:${message.channelId}`];
  if (message.channel.isThread() && message.channel.parentId) scopes.push(`channel:${message.channel.parentId}`);
  for (const roleId of message.member?.roles.cache.keys() ?? []) {
    // @everyone has the guild's id: `guild:<id>` says that already.
    if (roleId !== message.guildId) scopes.push(`role:${roleId}`);
  }
  return scopes;
}

function attachmentsOf(message: Message): InboundAttachment[] {
  const voice = message.flags.has(MessageFlags.IsVoiceMessage);
  return [...message.attachments.values()].map((attachment) => ({
    id: attachment.id,
    name: attachment.name,
    size: attachment.size,
    url: attachment.url,
    ...(attachment.contentType ? { contentType: attachment.contentType } : {}),
    ...(voice ? { voice } : {}),
    ...(typeof attachment.duration === "number" ? { durationSeconds: attachment.duration } : {}),
  }));
}

function assertReadable(message: Message): void {
  const missing = [
    typeof message.id === "string" ? undefined : "id",
    typeof message.channelId === "string" && message.channel ? undefined : "channel_id",
    typeof message.author?.id === "string" ? undefined : "author",
    typeof message.content === "string" ? undefined : "content",
  ].filter((field) => field !== undefined);
  if (missing.length > 0) throw new UnreadableMessageError(`MESSAGE_CREATE without ${missing.join(", ")}`);
}

/**
 * The event of one message, or undefined for a system message. Downloads its images first (not for
 * bots: their events are only flagged). Rejects with UnreadableMessageError for a payload missing
 * what an event needs, and when `signal` aborts.
 */
export async function toPlatformEvent(message: Message, context: InboundContext, signal: AbortSignal): Promise<PlatformEvent | undefined> {
  assertReadable(message);
  if (!conversational.has(message.type)) return undefined;
  const chatType = chatTypeOf(message);
  const { text, mentionsBot } = addressing(message, context.botId);
  // Bots and webhooks (their author is a bot too) are never answered: no point fetching their files.
  const senderIsBot = message.author.bot || message.webhookId !== null;
  const { media, notes }: { media: Media[]; notes: string[] } = senderIsBot ? { media: [], notes: [] } : await context.downloader.collect(attachmentsOf(message), signal);
  const event: PlatformEvent = {
    eventId: message.id,
    chatId: message.channelId,
    chatType,
    senderId: message.author.id,
    senderName: message.member?.displayName ?? message.author.displayName,
    senderIsBot,
    text: [text, ...notes].filter((part) => part.length > 0).join("\n\n"),
    mentionsBot,
    repliesToBot: repliesToBot(message, context.botId),
    platformMessageId: message.id,
    media,
    receivedAt: context.now(),
  };
  const scopes = scopesOf(message);
  if (scopes.length > 0) event.scopes = scopes;
  if (chatType === "thread" && context.inheritParent && message.channel.isThread() && message.channel.parentId) {
    event.metadata = { parentChatId: message.channel.parentId };
  }
  return event;
}
