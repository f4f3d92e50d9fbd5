/**
 * Bus payloads where they enter a process. What another process wrote into Redis is parsed against
 * the message model before any code here reads it: a payload from a process of another version, or
 * a damaged one, is refused with the field it got wrong, instead of breaking whatever reads it
 * later (a claim loop that threw on it would take the chat's lease again and again). Keys the model
 * does not know pass through, so a rolling upgrade that adds one keeps working.
 *
 * A refused inbound message keeps its place in the claim as a stand-in marked
 * `metadata.refusedPayload` (the mailbox counts by position): the worker dead-letters it and tells
 * the chat, as it does a poison turn.
 */
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { ChatTypeSchema, type InboundMessage, InboundMessageSchema, type OutboundMessage, OutboundMessageSchema, SYSTEM_CHANNEL } from "./message.js";
import type { Draft } from "./message-bus.js";

/**
 * What travels in the stream: a whole final/notice, or a pointer to a draft's newest text. A final
 * whose reply had drafts published says so (`drafted`): only then does its delivery leave a
 * finished marker for other consumers (drafts of a reply without any need none).
 */
export type StreamEvent = { type: "message"; message: OutboundMessage; drafted?: true } | { type: "draft"; draft: Omit<Draft, "text"> };

export type Parsed<T> = { ok: true; value: T } | { ok: false; problem: string };

const InboundPayloadSchema = InboundMessageSchema.loose();

const StreamEventSchema = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("message"), message: OutboundMessageSchema.loose(), drafted: z.literal(true).optional() }),
  z.looseObject({
    type: z.literal("draft"),
    draft: z.looseObject({ replyId: z.string().min(1), channel: z.string().min(1), chatId: z.string().min(1), replyTo: z.string().optional(), chatType: ChatTypeSchema.optional() }),
  }),
]);

function parse<T>(schema: z.ZodType<T>, raw: string): Parsed<T> {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    return { ok: false, problem: `not JSON (${error instanceof Error ? error.message : String(error)})` };
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return { ok: true, value: parsed.data };
  return { ok: false, problem: parsed.error.issues.map((issue) => `${issue.path.join(".") || "(the payload)"}: ${issue.message}`).join("; ") };
}

/** An inbound message as a worker reads it from a session's mailbox. */
export function parseInboundPayload(raw: string): Parsed<InboundMessage> {
  return parse(InboundPayloadSchema, raw);
}

/** An outbound stream entry as a gateway reads it. */
export function parseStreamEvent(raw: string): Parsed<StreamEvent> {
  return parse(StreamEventSchema, raw) as Parsed<StreamEvent>;
}

/** The stand-in for an inbound payload that did not parse: in the session it was queued for, marked with why. */
export function refusedInbound(sessionKey: string, raw: string, problem: string): InboundMessage {
  const separator = sessionKey.indexOf(":");
  const [channel, chatId] = separator > 0 ? [sessionKey.slice(0, separator), sessionKey.slice(separator + 1)] : [SYSTEM_CHANNEL, sessionKey];
  const id = /"id"\s*:\s*"([^"]{1,200})"/.exec(raw)?.[1] ?? `refused-${randomUUID()}`;
  return { id, channel, chatId, senderId: "unknown", content: "", media: [], mentions: [], receivedAt: Date.now(), metadata: { refusedPayload: problem } };
}

/** Why the bus refused this message's payload, when it did. */
export function refusedPayloadOf(message: InboundMessage): string | undefined {
  const problem = message.metadata.refusedPayload;
  return typeof problem === "string" ? problem : undefined;
}
