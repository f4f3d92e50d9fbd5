/**
 * A turn's spans, in the trace of the message that started it (carried on the bus from the
 * gateway, src/tracing.ts): `bus wait` from its publish to the claim, then `turn`, under which the
 * model calls, tool calls and the reply's publish happen. The other messages of a coalesced turn
 * are linked, so their traces lead here too.
 */
import type { Claim } from "../bus/message-bus.js";
import { type Span, SpanKind, contextOf, inSpan, linkTo, startSpan } from "../tracing.js";

export function inTurnSpan<T>(claim: Claim, now: () => number, work: (span: Span) => Promise<T>): Promise<T> {
  const first = claim.messages[0]!;
  const parent = contextOf(first.traceContext);
  const attributes = { "countbot.session": claim.sessionKey, "countbot.message_id": first.id, "countbot.channel": first.channel };
  const sentAt = first.traceContext?.sentAt;
  if (sentAt !== undefined) {
    const claimedAt = now();
    startSpan("bus wait", { kind: SpanKind.CONSUMER, parent, startTime: Math.min(sentAt, claimedAt), attributes }).end(claimedAt);
  }
  const links = claim.messages.slice(1).flatMap((message) => linkTo(message.traceContext) ?? []);
  return inSpan("turn", { kind: SpanKind.CONSUMER, parent, links, attributes: { ...attributes, "countbot.messages": claim.messages.length, "countbot.attempt": claim.attempt } }, work);
}
