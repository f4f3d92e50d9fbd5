/**
 * The outbound messages a turn publishes, shaped from the inbound ones it answers: ids that make a
 * repeated publish one message, the chat the reply goes to, the platform message it threads to,
 * which messages it answers, and the one-line notice of a tool call.
 */
import { type InboundMessage, type OutboundMessage, replyTarget } from "../bus/message.js";

/** The id of a turn's `sequence`-th outbound message: derived from its first inbound one, so a re-run turn publishes the same ids. */
export function outboundId(first: InboundMessage, sequence: number): string {
  return `${first.id}:${sequence}`;
}

function platformMessageId(message: InboundMessage): string | undefined {
  const value = message.metadata.platformMessageId;
  return typeof value === "string" || typeof value === "number" ? String(value) : undefined;
}

/**
 * The platform message a turn's reply threads to: the last of its messages that has one. A burst
 * from several people is answered once, under the newest question (the reply names each asker); a
 * background event carries its trigger's (a team run's result threads to the message that started it).
 */
export function replyToOf(messages: InboundMessage[]): string | undefined {
  for (let index = messages.length - 1; index >= 0; index -= 1) {
    const id = platformMessageId(messages[index]!);
    if (id !== undefined) return id;
  }
  return undefined;
}

/** The turn's final reply to its chat, threaded to the newest message that has a platform id. */
export function finalMessage(messages: InboundMessage[], content: string): OutboundMessage {
  const first = messages[0]!;
  const target = replyTarget(first);
  const replyTo = replyToOf(messages);
  return {
    id: outboundId(first, 0),
    channel: target.channel,
    chatId: target.chatId,
    content,
    kind: "final",
    media: [],
    metadata: {},
    ...(replyTo ? { replyTo } : {}),
    ...(first.chatType ? { chatType: first.chatType } : {}),
  };
}

/** Records which inbound messages a final reply answers, so a channel can match them up. */
export function answering(message: OutboundMessage, messages: InboundMessage[]): OutboundMessage {
  return { ...message, metadata: { ...message.metadata, answers: messages.map((inbound) => inbound.id) } };
}

/** `name(arguments)`, the arguments on one line and cut at 120 characters: what a chat sees of a tool call. */
export function toolNotice(name: string, argumentsText: string): string {
  const compact = argumentsText.replace(/\s+/g, " ");
  return `${name}(${compact.length > 120 ? `${compact.slice(0, 117)}...` : compact})`;
}
