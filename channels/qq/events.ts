/**
 * The gateway payloads and message events of the QQ Bot API v2, as far as the channel reads them
 * (only what is used is declared; the rest passes), and their normalization into PlatformEvents.
 *
 * - `GROUP_AT_MESSAGE_CREATE`: a group message that @mentions the bot (QQ delivers no other group
 *   messages to a bot); the bot's @ is already removed from `content`. Sender: `member_openid`.
 * - `C2C_MESSAGE_CREATE`: a one-to-one message. Sender: `user_openid`.
 * - `AT_MESSAGE_CREATE` (a guild channel message @mentioning the bot), `MESSAGE_CREATE` (every
 *   channel message, private-domain bots), `DIRECT_MESSAGE_CREATE` (a guild DM): the content
 *   carries mentions as `<@!id>`; the bot's own are removed, the bot is mentioned when the event
 *   type says so or `mentions` names its id (nothing else counts: fail closed).
 * - `eventId`: the dispatch's `id` (a resumed session or a webhook retry delivers it again with it).
 */
import { z } from "zod";
import type { PlatformEvent } from "../../src/gateway/kit/index.js";
import { chatIdOf } from "./chat-route.js";

export const PayloadSchema = z.looseObject({
  op: z.number().int(),
  d: z.unknown().optional(),
  s: z.number().int().optional(),
  t: z.string().optional(),
  id: z.string().optional(),
});
export type Payload = z.infer<typeof PayloadSchema>;

const AttachmentSchema = z.looseObject({ content_type: z.string().optional(), filename: z.string().optional(), url: z.string().optional() });

const MessageSchema = z.looseObject({
  id: z.string().min(1),
  content: z.string().default(""),
  timestamp: z.union([z.string(), z.number()]).optional(),
  attachments: z.array(AttachmentSchema).optional(),
});

const GroupMessageSchema = MessageSchema.extend({
  group_openid: z.string().min(1),
  author: z.looseObject({ member_openid: z.string().min(1), union_openid: z.string().optional() }),
});

const C2CMessageSchema = MessageSchema.extend({
  author: z.looseObject({ user_openid: z.string().min(1), union_openid: z.string().optional() }),
});

const UserSchema = z.looseObject({ id: z.string().min(1), username: z.string().optional(), bot: z.boolean().optional() });

const GuildMessageSchema = MessageSchema.extend({
  channel_id: z.string().min(1),
  guild_id: z.string().min(1),
  author: UserSchema,
  member: z.looseObject({ nick: z.string().optional() }).optional(),
  mentions: z.array(UserSchema).optional(),
});

/** The message events the channel answers. */
export const MESSAGE_EVENTS = ["GROUP_AT_MESSAGE_CREATE", "C2C_MESSAGE_CREATE", "AT_MESSAGE_CREATE", "MESSAGE_CREATE", "DIRECT_MESSAGE_CREATE"] as const;
export type MessageEventType = (typeof MESSAGE_EVENTS)[number];

export const isMessageEvent = (type: string | undefined): type is MessageEventType => (MESSAGE_EVENTS as readonly string[]).includes(type ?? "");

function attachmentNotes(attachments: z.infer<typeof AttachmentSchema>[] | undefined): string[] {
  return (attachments ?? []).map((attachment) => {
    const kind = attachment.content_type?.startsWith("image/") || attachment.content_type === "image" ? "an image" : "a file";
    return attachment.filename ? `[${kind}: "${attachment.filename}"]` : `[${kind}]`;
  });
}

function joined(text: string, notes: string[]): string {
  return [text.trim(), ...notes].filter((part) => part.length > 0).join("\n\n");
}

/** Guild content: the bot's own mention tokens removed, other users' shown as `@name`. */
function guildText(content: string, mentions: z.infer<typeof UserSchema>[], botId: string | undefined): string {
  return content.replace(/<@!?(\w+)>/g, (token, id: string) => {
    if (botId !== undefined && id === botId) return "";
    const user = mentions.find((mention) => mention.id === id);
    return user?.username ? `@${user.username}` : token;
  });
}

/** One message event as a PlatformEvent; undefined when its fields are not what QQ sends (logged by the caller). */
export function toPlatformEvent(type: MessageEventType, eventId: string | undefined, data: unknown, context: { botId?: string; now: number }): PlatformEvent | { error: string } {
  const base = { repliesToBot: false, media: [], receivedAt: context.now };
  if (type === "GROUP_AT_MESSAGE_CREATE") {
    const parsed = GroupMessageSchema.safeParse(data);
    if (!parsed.success) return { error: parsed.error.issues[0]?.message ?? "bad group message" };
    const message = parsed.data;
    const union = message.author.union_openid;
    return {
      ...base,
      eventId: eventId ?? message.id,
      chatId: chatIdOf("group", message.group_openid),
      chatType: "group",
      senderId: message.author.member_openid,
      senderIsBot: false,
      ...(union ? { scopes: [union] } : {}),
      text: joined(message.content, attachmentNotes(message.attachments)),
      mentionsBot: true,
      platformMessageId: message.id,
      metadata: { qqEvent: type, qqGroupOpenId: message.group_openid },
    };
  }
  if (type === "C2C_MESSAGE_CREATE") {
    const parsed = C2CMessageSchema.safeParse(data);
    if (!parsed.success) return { error: parsed.error.issues[0]?.message ?? "bad C2C message" };
    const message = parsed.data;
    const union = message.author.union_openid;
    return {
      ...base,
      eventId: eventId ?? message.id,
      chatId: chatIdOf("user", message.author.user_openid),
      chatType: "private",
      senderId: message.author.user_openid,
      senderIsBot: false,
      ...(union ? { scopes: [union] } : {}),
      text: joined(message.content, attachmentNotes(message.attachments)),
      mentionsBot: false,
      platformMessageId: message.id,
      metadata: { qqEvent: type },
    };
  }
  const parsed = GuildMessageSchema.safeParse(data);
  if (!parsed.success) return { error: parsed.error.issues[0]?.message ?? "bad guild message" };
  const message = parsed.data;
  const mentions = message.mentions ?? [];
  const direct = type === "DIRECT_MESSAGE_CREATE";
  const name = message.member?.nick || message.author.username;
  return {
    ...base,
    eventId: eventId ?? message.id,
    chatId: direct ? chatIdOf("dms", message.guild_id) : chatIdOf("channel", message.channel_id),
    chatType: direct ? "private" : "group",
    senderId: message.author.id,
    ...(name ? { senderName: name } : {}),
    senderIsBot: message.author.bot === true,
    text: joined(guildText(message.content, mentions, context.botId), attachmentNotes(message.attachments)),
    mentionsBot: type === "AT_MESSAGE_CREATE" || (context.botId !== undefined && mentions.some((mention) => mention.id === context.botId)),
    platformMessageId: message.id,
    metadata: { qqEvent: type, qqGuildId: message.guild_id, qqChannelId: message.channel_id },
  };
}
