/**
 * The Slack payloads the channel reads, checked with zod: an Events API callback (`event_callback`
 * with its `event`), the message and app_mention events in it, and a slash command. Loose objects:
 * Slack adds fields, and only the ones read here are checked.
 */
import { z } from "zod";

export const SlackFileSchema = z.looseObject({
  id: z.string().min(1),
  name: z.string().optional(),
  title: z.string().optional(),
  mimetype: z.string().optional(),
  size: z.number().optional(),
  url_private: z.string().optional(),
  url_private_download: z.string().optional(),
  mode: z.string().optional(),
});
export type SlackFile = z.infer<typeof SlackFileSchema>;

/** A `message` or `app_mention` event. */
export const MessageEventSchema = z.looseObject({
  type: z.enum(["message", "app_mention"]),
  subtype: z.string().optional(),
  channel: z.string().min(1),
  channel_type: z.string().optional(),
  user: z.string().optional(),
  bot_id: z.string().optional(),
  text: z.string().default(""),
  ts: z.string().min(1),
  thread_ts: z.string().optional(),
  parent_user_id: z.string().optional(),
  client_msg_id: z.string().optional(),
  team: z.string().optional(),
  files: z.array(SlackFileSchema).optional(),
});
export type MessageEvent = z.infer<typeof MessageEventSchema>;

export const EventCallbackSchema = z.looseObject({
  type: z.literal("event_callback"),
  team_id: z.string().optional(),
  event_id: z.string().min(1),
  event_time: z.number().optional(),
  event: z.looseObject({ type: z.string().min(1) }),
});
export type EventCallback = z.infer<typeof EventCallbackSchema>;

/** What Slack posts to an HTTP Request URL as JSON: a URL check, an event, or a notice that events are being held back. */
export const HttpBodySchema = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("url_verification"), challenge: z.string() }),
  EventCallbackSchema,
  z.looseObject({ type: z.literal("app_rate_limited") }),
]);

export const SlashCommandSchema = z.looseObject({
  command: z.string().startsWith("/"),
  text: z.string().default(""),
  user_id: z.string().min(1),
  user_name: z.string().optional(),
  channel_id: z.string().min(1),
  team_id: z.string().optional(),
  trigger_id: z.string().min(1),
});
export type SlashCommand = z.infer<typeof SlashCommandSchema>;

/** Message subtypes that are someone saying something; the rest (joins, edits, deletions) are not answered. */
export const CONVERSATIONAL_SUBTYPES: ReadonlySet<string | undefined> = new Set([undefined, "file_share", "thread_broadcast", "bot_message", "me_message"]);
