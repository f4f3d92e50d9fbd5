/**
 * A job's run as a span (`process <queue>`), in the trace of whatever queued it: the queue keeps
 * the adder's trace context with the job (BullMQ: the job's `telemetry.metadata` option, stored in
 * Redis with it; in process: the entry), so a subagent or a team run started by a turn on one
 * worker shows under that turn wherever it runs. A job queued outside any span starts a trace.
 */
import { SpanKind, type TraceCarrier, contextOf, inSpan } from "../tracing.js";

export function inJobSpan<T>(queue: string, job: { id: string; name: string; attempt: number }, carrier: TraceCarrier | undefined, work: () => Promise<T>): Promise<T> {
  const attributes = { "messaging.system": "countbot", "messaging.destination.name": queue, "messaging.message.id": job.id, "countbot.job.name": job.name, "countbot.job.attempt": job.attempt };
  const parent = carrier ? { parent: contextOf(carrier) } : {};
  return inSpan(`process ${queue}`, { kind: SpanKind.CONSUMER, attributes, ...parent }, () => work());
}
