/**
 * A Telegram message, normalized into a PlatformEvent: who sent it, whether it is addressed to the
 * bot (by its entities: a mention, a command `/x@ThisBot`; a reply to the bot), and its photo,
 * document, voice note or audio file downloaded as media (audio marked `kind: "audio"` with its
 * duration, for the gateway to transcribe).
 */
import type { Media } from "../../src/bus/message.js";
import type { PlatformEvent } from "../../src/gateway/kit/index.js";
import type { Attachment, DownloadResult } from "./file-download.js";
import type { MessageEntity, PhotoSize, TelegramMessage, TelegramUser } from "./update-schema.js";

/** Who the bot is, from getMe. */
export interface BotIdentity {
  id: number;
  username: string;
}

export interface InboundContext {
  bot: BotIdentity;
  download(attachment: Attachment, signal: AbortSignal): Promise<DownloadResult>;
  now(): number;
}

interface Addressing {
  text: string;
  mentionsBot: boolean;
}

/** Entities whose text is shown as written: a mention inside them is not one. */
const verbatim = new Set(["code", "pre"]);

/**
 * Whether the message addresses the bot, read from the entities Telegram attached, never from the
 * text: a `bot_command` at the start naming this bot (`/new@ThisBot`, which then reads as `/new` to
 * the command parser), a `mention` entity that is `@ThisBot`, or a `text_mention` of the bot's id.
 * `@ThisBot` typed inside code, or in a text that carries no such entity (a forwarded text, a
 * caption pasted as plain text), is not addressing. A leading command addressed to another bot
 * (`/new@OtherBot`) is not for us, whatever else the text says; its text is kept as is.
 */
export function addressing(text: string, entities: readonly MessageEntity[], bot: BotIdentity): Addressing {
  const username = bot.username.toLowerCase();
  const spanOf = (entity: MessageEntity) => text.slice(entity.offset, entity.offset + entity.length);
  const insideCode = (entity: MessageEntity) =>
    entities.some((other) => verbatim.has(other.type) && other.offset <= entity.offset && entity.offset + entity.length <= other.offset + other.length);
  const command = entities.find((entity) => entity.type === "bot_command" && entity.offset === 0);
  const addressee = command && /^(\/\w+)@(\w+)$/.exec(spanOf(command));
  if (command && addressee) {
    if (addressee[2]!.toLowerCase() !== username) return { text, mentionsBot: false };
    return { text: addressee[1]! + text.slice(command.length), mentionsBot: true };
  }
  const mentionsBot = entities.some((entity) => {
    if (insideCode(entity)) return false;
    if (entity.type === "text_mention") return entity.user?.id === bot.id;
    return entity.type === "mention" && spanOf(entity).toLowerCase() === `@${username}`;
  });
  return { text, mentionsBot };
}

function displayName(user: TelegramUser): string {
  const name = [user.first_name, user.last_name].filter(Boolean).join(" ").trim();
  return name || user.username || String(user.id);
}

/** The largest size of a photo: Telegram lists sizes from small to large, but say so by the numbers. */
function largest(sizes: readonly PhotoSize[]): PhotoSize {
  return sizes.reduce((best, size) => (size.width * size.height >= best.width * best.height ? size : best));
}

function attachmentsOf(message: TelegramMessage): Attachment[] {
  const attachments: Attachment[] = [];
  if (message.photo) {
    const photo = largest(message.photo);
    attachments.push({ fileId: photo.file_id, uniqueId: photo.file_unique_id, declaredSize: photo.file_size, kind: "image", mimeType: "image/jpeg", label: "photo" });
  }
  if (message.document) {
    const document = message.document;
    // An image sent "as a file" is still an image to the model.
    const kind = document.mime_type?.startsWith("image/") ? "image" : "document";
    attachments.push({
      fileId: document.file_id,
      uniqueId: document.file_unique_id,
      declaredSize: document.file_size,
      kind,
      mimeType: document.mime_type,
      name: document.file_name,
      label: document.file_name ? `document "${document.file_name}"` : "document",
    });
  }
  for (const [audio, label] of [[message.voice, "voice message"], [message.audio, "audio file"]] as const) {
    if (!audio) continue;
    // Transcribed at admission; the type names the format for the transcription API (`.oga` voice notes are Ogg).
    attachments.push({
      fileId: audio.file_id,
      uniqueId: audio.file_unique_id,
      declaredSize: audio.file_size,
      kind: "audio",
      mimeType: audio.mime_type ?? "audio/ogg",
      ...(audio.file_name ? { name: audio.file_name } : {}),
      ...(audio.duration !== undefined ? { durationSeconds: audio.duration } : {}),
      label,
    });
  }
  return attachments;
}

/** Builds the event of one message; downloads its files first. Rejects only when `signal` aborts. */
export async function toPlatformEvent(updateId: number, message: TelegramMessage, context: InboundContext, signal: AbortSignal): Promise<PlatformEvent> {
  const raw = message.text ?? message.caption ?? "";
  const entities = message.entities ?? message.caption_entities ?? [];
  const { text, mentionsBot } = addressing(raw, entities, context.bot);
  const media: Media[] = [];
  const notes: string[] = [];
  for (const attachment of attachmentsOf(message)) {
    const result = await context.download(attachment, signal);
    if ("media" in result) media.push(result.media);
    else notes.push(result.note);
  }
  // Anonymous group admins and linked channels write as a chat: that chat is the sender, and not a bot.
  const sender = message.sender_chat
    ? { senderId: String(message.sender_chat.id), senderName: message.sender_chat.title, senderIsBot: false }
    : message.from
      ? { senderId: String(message.from.id), senderName: displayName(message.from), senderIsBot: message.from.is_bot }
      : { senderId: String(message.chat.id), senderName: message.chat.title, senderIsBot: false };
  const event: PlatformEvent = {
    eventId: String(updateId),
    chatId: String(message.chat.id),
    chatType: message.chat.type === "private" ? "private" : "group",
    ...sender,
    text: [text, ...notes].filter((part) => part.length > 0).join("\n\n"),
    mentionsBot,
    repliesToBot: message.reply_to_message?.from?.id === context.bot.id,
    platformMessageId: String(message.message_id),
    media,
    receivedAt: context.now(),
  };
  if (event.senderName === undefined) delete event.senderName;
  return event;
}
