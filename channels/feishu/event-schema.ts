/**
 * The parts of Feishu's `im.message.receive_v1` event the channel reads, and the content of each
 * message type it understands. Events come as schema 2.0 envelopes (`{schema, header, event}`);
 * both inbound paths hand them on flattened (`{...header, ...event}`, the shape the SDK's event
 * dispatcher gives the long connection). Only what is used is declared; the rest passes.
 */
import { z } from "zod";

export const MESSAGE_RECEIVED = "im.message.receive_v1";

const UserIdSchema = z.looseObject({
  open_id: z.string().optional(),
  user_id: z.string().optional().nullable(),
  union_id: z.string().optional(),
});

export const MentionSchema = z.looseObject({
  key: z.string(),
  id: UserIdSchema.optional(),
  name: z.string().optional(),
});
export type Mention = z.infer<typeof MentionSchema>;

export const FeishuMessageSchema = z.looseObject({
  message_id: z.string().min(1),
  root_id: z.string().optional().nullable(),
  parent_id: z.string().optional().nullable(),
  thread_id: z.string().optional().nullable(),
  create_time: z.string().optional(),
  chat_id: z.string().min(1),
  chat_type: z.string(),
  message_type: z.string(),
  content: z.string(),
  mentions: z.array(MentionSchema).optional().nullable(),
});
export type FeishuMessage = z.infer<typeof FeishuMessageSchema>;

export const MessageEventSchema = z.looseObject({
  event_id: z.string().min(1),
  event_type: z.literal(MESSAGE_RECEIVED),
  create_time: z.string().optional(),
  token: z.string().optional(),
  sender: z.looseObject({
    sender_id: UserIdSchema.optional(),
    sender_type: z.string().optional(),
  }),
  message: FeishuMessageSchema,
});
export type MessageEvent = z.infer<typeof MessageEventSchema>;

/** `{schema: "2.0", header, event}` → `{...header, ...event}`; an older (1.0) body is left as it is. */
export function flattenEnvelope(body: Record<string, unknown>): Record<string, unknown> {
  const { header, event, ...rest } = body as { header?: unknown; event?: unknown };
  if (typeof header !== "object" || header === null) return body;
  return { ...rest, ...(header as Record<string, unknown>), ...(typeof event === "object" && event !== null ? (event as Record<string, unknown>) : {}) };
}

export const TextContentSchema = z.looseObject({ text: z.string().default("") });
export const ImageContentSchema = z.looseObject({ image_key: z.string().min(1) });
export const FileContentSchema = z.looseObject({ file_key: z.string().min(1), file_name: z.string().optional() });
/** A voice message: its Opus recording and how long it plays, in milliseconds. */
export const AudioContentSchema = z.looseObject({ file_key: z.string().min(1), duration: z.number().nonnegative().optional() });

export const PostElementSchema = z.looseObject({
  tag: z.string(),
  text: z.string().optional(),
  href: z.string().optional(),
  user_id: z.string().optional(),
  user_name: z.string().optional(),
  image_key: z.string().optional(),
  file_key: z.string().optional(),
  language: z.string().optional(),
  emoji_type: z.string().optional(),
});
export type PostElement = z.infer<typeof PostElementSchema>;

const PostBodySchema = z.looseObject({
  title: z.string().optional().nullable(),
  content: z.array(z.array(PostElementSchema)).default([]),
});

/** A received post is `{title, content}`; one sent through the API is keyed by language (`zh_cn`, `en_us`). */
export const PostContentSchema = z.union([
  PostBodySchema.refine((post) => Array.isArray((post as { content?: unknown }).content)),
  z.record(z.string(), PostBodySchema).transform((byLanguage) => Object.values(byLanguage)[0] ?? { title: "", content: [] }),
]);
export type PostContent = z.infer<typeof PostBodySchema>;
