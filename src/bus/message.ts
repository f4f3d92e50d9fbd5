/**
 * The one normalized message model. Platform payloads are turned into these at the channel edge.
 */
import { z } from "zod";
import { ChatCommandSchema } from "./commands.js";

export const MediaSchema = z.strictObject({
  /** Local path of the downloaded file (workspace or data dir). */
  path: z.string().min(1),
  mimeType: z.string().optional(),
  kind: z.enum(["image", "audio", "video", "document"]).default("document"),
  name: z.string().optional(),
  /** How long a voice note or audio file plays, in seconds, when the platform said so. */
  durationSeconds: z.number().nonnegative().optional(),
});
export type Media = z.infer<typeof MediaSchema>;

/** Said by the platform: a one-to-one chat, a group (channel, guild channel), or a thread in one. */
export const ChatTypeSchema = z.enum(["private", "group", "thread"]);
export type ChatType = z.infer<typeof ChatTypeSchema>;

/**
 * A message from a multi-person chat (a group, a guild channel, a thread), as the gateway saw it:
 * built from the platform's own fields, never from the message text, so a member cannot speak as
 * another. Set when the channel's `groupContext` is `labelled` (the default); absent in private
 * chats. The agent labels the message with its speaker and describes the group in its prompt.
 */
export const GroupContextSchema = z.strictObject({
  /** The sender's display name as the platform gave it; absent when the platform gives none (Feishu). */
  senderName: z.string().optional(),
  /** The bot's own handle on the platform (without `@`), when the adapter knows it. */
  botHandle: z.string().optional(),
  /** How the bot is addressed there: `mention` (an @mention or a reply to it) or `all` (every message). */
  addressing: z.enum(["mention", "all"]),
});
export type GroupContext = z.infer<typeof GroupContextSchema>;

/**
 * W3C trace context of the span that published a message (src/tracing.ts), so whoever takes it off
 * the bus, in any process, continues the same trace. Absent while tracing is off.
 */
export const TraceContextSchema = z.strictObject({
  traceparent: z.string().max(256),
  tracestate: z.string().max(512).optional(),
  /** When it was published (ms since the epoch): the start of the bus wait. */
  sentAt: z.number().int().nonnegative().optional(),
});

/**
 * The keys of an inbound message's metadata the core reads, typed; a platform's own keys
 * (`qqEvent`, `slackChannel`, `wecomAgentId` …) pass through as they are.
 */
export const InboundMetadataSchema = z.looseObject({
  /** The person the sender is linked to (`memory.identities`): set by the gateway's admission only. */
  person: z.string().optional(),
  /** The sender's display name, where the platform gives one outside `group`. */
  senderName: z.string().optional(),
  /** A thread's parent channel, when threads inherit its context (Discord, Slack). */
  parentChatId: z.string().optional(),
  /** The platform's id of the message, for replies and team triggers. */
  platformMessageId: z.string().optional(),
  /** A request that waits for its own answer (the OpenAI-compatible endpoint's): never coalesced. */
  ownTurn: z.boolean().optional(),
  /** Set by the bus on a stand-in for a payload that did not parse (payloads.ts): why. */
  refusedPayload: z.string().optional(),
  /** On a background event (`system`): the agent profile of the job it is about, which answers it. */
  profile: z.string().optional(),
});
export type InboundMetadata = z.infer<typeof InboundMetadataSchema>;

/** The keys of an outbound message's metadata the core and the channels read, typed; others pass through. */
export const OutboundMetadataSchema = z.looseObject({
  /** The inbound message ids this reply answers. */
  answers: z.array(z.string()).optional(),
  /** The turn's token counts, on its final. */
  usage: z
    .object({ inputTokens: z.number().nonnegative(), outputTokens: z.number().nonnegative(), cachedInputTokens: z.number().nonnegative().optional(), reasoningTokens: z.number().nonnegative().optional() })
    .optional(),
  /** A notice that relays the model's reasoning (`agent.showReasoning`). */
  reasoning: z.boolean().optional(),
  /** A notice about a budget (warned, or spent). */
  budget: z.boolean().optional(),
  /** A tool notice: the tool's name. */
  tool: z.string().optional(),
  /** The gateway's own reply (pairing, refusals): plain text, never a draft. */
  gateway: z.boolean().optional(),
  /** A notice shown only where the channel asks for them (a team agent's streamed text). */
  transient: z.boolean().optional(),
  /** A team run's progress (progress.ts), a background task's notice, a team's: read by the web console. */
  workflow: z.unknown().optional(),
  task: z.unknown().optional(),
  team: z.unknown().optional(),
});
export type OutboundMetadata = z.infer<typeof OutboundMetadataSchema>;

export const InboundMessageSchema = z.strictObject({
  id: z.string().min(1),
  channel: z.string().min(1).regex(/^[\w-]+(\.[\w-]+)?$/, "letters, digits, _ and - (an account after a dot: telegram.support)"),
  chatId: z.string().min(1),
  senderId: z.string().min(1),
  content: z.string(),
  media: z.array(MediaSchema).default([]),
  mentions: z.array(z.string()).default([]),
  replyTo: z.string().optional(),
  receivedAt: z.number().int().nonnegative(),
  platformEventId: z.string().optional(),
  chatType: ChatTypeSchema.optional(),
  /** The chat command this message is (`/new`, `/status`), parsed once at admission from the platform's text. */
  command: ChatCommandSchema.optional(),
  group: GroupContextSchema.optional(),
  traceContext: TraceContextSchema.optional(),
  metadata: InboundMetadataSchema.default({}),
});
export type InboundMessage = z.infer<typeof InboundMessageSchema>;
export type InboundMessageInput = z.input<typeof InboundMessageSchema>;

export const OutboundKindSchema = z.enum(["final", "draft", "notice"]);
export type OutboundKind = z.infer<typeof OutboundKindSchema>;

export const OutboundMessageSchema = z.strictObject({
  /** Deterministic: `<first inbound id of the turn>:<seq>`, so a re-run turn repeats its ids. */
  id: z.string().min(1),
  channel: z.string().min(1),
  chatId: z.string().min(1),
  content: z.string(),
  replyTo: z.string().optional(),
  kind: OutboundKindSchema,
  /** The chat's type, copied from the messages the turn answers (drafts stream differently in private chats). */
  chatType: ChatTypeSchema.optional(),
  media: z.array(MediaSchema).default([]),
  traceContext: TraceContextSchema.optional(),
  metadata: OutboundMetadataSchema.default({}),
});
export type OutboundMessage = z.infer<typeof OutboundMessageSchema>;
export type OutboundMessageInput = z.input<typeof OutboundMessageSchema>;

/** The `system` channel carries background completions; its chatId is the origin session key. */
export const SYSTEM_CHANNEL = "system";

/**
 * The key of a conversation: one turn at a time runs per session. A `system` message belongs to
 * the session it names, so it queues behind that chat's own messages.
 */
export function sessionKeyOf(message: { channel: string; chatId: string }): string {
  if (message.channel === SYSTEM_CHANNEL) return message.chatId;
  return `${message.channel}:${message.chatId}`;
}

/**
 * The person a message is from, `channel:senderId` (whose budget it counts against). A channel that
 * linked the sender to another identity says so in `metadata.person`, and that key is used instead.
 */
export function personOf(message: { channel: string; senderId: string; metadata?: Record<string, unknown> }): string {
  const linked = message.metadata?.person;
  return typeof linked === "string" && linked !== "" ? linked : `${message.channel}:${message.senderId}`;
}

/**
 * Where a turn's reply goes. For `system` messages that is the origin chat encoded in the chatId.
 */
export function replyTarget(message: { channel: string; chatId: string }): { channel: string; chatId: string } {
  if (message.channel !== SYSTEM_CHANNEL) return { channel: message.channel, chatId: message.chatId };
  const separator = message.chatId.indexOf(":");
  if (separator <= 0) return { channel: "cli", chatId: message.chatId };
  return { channel: message.chatId.slice(0, separator), chatId: message.chatId.slice(separator + 1) };
}
