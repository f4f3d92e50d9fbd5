/**
 * The part of a Telegram Update the adapter reads, as zod schemas: the single source of these types.
 * Unknown fields are dropped (Telegram adds fields with every Bot API release); anything the adapter
 * relies on is checked, so a bad webhook body fails here with the field named.
 */
import { z } from "zod";

const id = z.number().int();

export const TelegramUserSchema = z.object({
  id,
  is_bot: z.boolean(),
  first_name: z.string(),
  last_name: z.string().optional(),
  username: z.string().optional(),
});
export type TelegramUser = z.infer<typeof TelegramUserSchema>;

export const TelegramChatSchema = z.object({
  id,
  type: z.enum(["private", "group", "supergroup", "channel"]),
  title: z.string().optional(),
  username: z.string().optional(),
});

/** Offsets and lengths count UTF-16 code units, the same unit as JavaScript string indices. */
export const MessageEntitySchema = z.object({
  type: z.string(),
  offset: z.number().int().nonnegative(),
  length: z.number().int().nonnegative(),
  user: TelegramUserSchema.optional(),
});
export type MessageEntity = z.infer<typeof MessageEntitySchema>;

const FileSchema = z.object({
  file_id: z.string().min(1),
  file_unique_id: z.string().min(1),
  file_size: z.number().int().nonnegative().optional(),
});

export const PhotoSizeSchema = FileSchema.extend({
  width: z.number().int().nonnegative(),
  height: z.number().int().nonnegative(),
});
export type PhotoSize = z.infer<typeof PhotoSizeSchema>;

export const DocumentSchema = FileSchema.extend({
  file_name: z.string().optional(),
  mime_type: z.string().optional(),
});

/** A voice note (`voice`, Ogg Opus) or a music file (`audio`); `duration` in seconds. */
export const AudioSchema = FileSchema.extend({
  duration: z.number().nonnegative().optional(),
  mime_type: z.string().optional(),
  file_name: z.string().optional(),
});
export type TelegramAudio = z.infer<typeof AudioSchema>;

export const TelegramMessageSchema = z.object({
  message_id: id,
  date: z.number().int(),
  chat: TelegramChatSchema,
  /** Absent for channel posts; the anonymous-admin bot for anonymous group admins (see sender_chat). */
  from: TelegramUserSchema.optional(),
  /** The chat a message was sent on behalf of (anonymous admins, linked channels). */
  sender_chat: z.object({ id, title: z.string().optional() }).optional(),
  text: z.string().optional(),
  caption: z.string().optional(),
  entities: z.array(MessageEntitySchema).optional(),
  caption_entities: z.array(MessageEntitySchema).optional(),
  photo: z.array(PhotoSizeSchema).min(1).optional(),
  document: DocumentSchema.optional(),
  voice: AudioSchema.optional(),
  audio: AudioSchema.optional(),
  reply_to_message: z.object({ message_id: id, from: TelegramUserSchema.optional() }).optional(),
});
export type TelegramMessage = z.infer<typeof TelegramMessageSchema>;

export const TelegramUpdateSchema = z.object({
  update_id: z.number().int().nonnegative(),
  /** The only kind of update the adapter asks for (`allowed_updates: ["message"]`); others are acknowledged and dropped. */
  message: TelegramMessageSchema.optional(),
});
export type TelegramUpdate = z.infer<typeof TelegramUpdateSchema>;

/** The answer of getFile. */
export const TelegramFileSchema = z.object({
  file_id: z.string(),
  file_size: z.number().int().nonnegative().optional(),
  file_path: z.string().optional(),
});
export type TelegramFile = z.infer<typeof TelegramFileSchema>;
