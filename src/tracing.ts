/**
 * Tracing, through the OpenTelemetry API alone. Every layer may start spans and carry a trace
 * across the bus and the job queues with these helpers; none of them loads the SDK. Until the
 * composition root registers one (src/app/tracing.ts, when the `OTEL_*` variables ask for it), the
 * API's globals are its no-ops: a span is a non-recording stand-in, `inject` writes nothing, so a
 * message carries no trace context and the cost is a few property reads per call.
 *
 * What crosses a process travels as W3C trace context (`traceparent`, `tracestate`) in a
 * {@link TraceCarrier}: on bus messages (`InboundMessage.traceContext`, `OutboundMessage.traceContext`)
 * and on BullMQ jobs (their `telemetry.metadata` option). Span attributes never hold message text,
 * tool arguments or results, nor anything secret: names, ids, counts and outcomes only.
 */
import { type Attributes, type Context, type Link, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, context, propagation, trace } from "@opentelemetry/api";

export { SpanKind, SpanStatusCode } from "@opentelemetry/api";
export type { Attributes, Context, Span } from "@opentelemetry/api";

/** The instrumentation scope of every CountBot span. */
export const TRACER_NAME = "countbot";

/** W3C trace context of the span that sent something, plus when it was sent. */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
  /** Milliseconds since the epoch when the carrier was made: where a wait (the bus, a queue) starts. */
  sentAt?: number;
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent; default: the active context. */
  parent?: Context;
  /** Other traces this span continues (the other messages of a coalesced turn). */
  links?: Link[];
  /** When the span began, in ms since the epoch; default: now. */
  startTime?: number;
}

/**
 * The tracer, asked for each span: the global provider it comes from can change (tests install and
 * remove SDKs), and a tracer kept from an earlier one would keep using that. With an SDK the
 * provider hands out the same tracer each time; without one, a tiny no-op proxy.
 */
function tracer() {
  return trace.getTracer(TRACER_NAME);
}

/** The active context as a carrier, or undefined when there is none to carry (tracing off, no span). */
export function currentTraceCarrier(now: () => number = Date.now): TraceCarrier | undefined {
  const active = context.active();
  if (!trace.getSpanContext(active)) return undefined;
  const headers: Record<string, string> = {};
  propagation.inject(active, headers);
  const traceparent = headers.traceparent;
  if (traceparent === undefined) return undefined;
  return { traceparent, ...(headers.tracestate ? { tracestate: headers.tracestate } : {}), sentAt: now() };
}

/**
 * The message with the active trace context (when there is one and it carries none yet): what a
 * bus does when it takes a message, so the reader continues the writer's trace.
 */
export function withTraceCarrier<Message extends { traceContext?: TraceCarrier }>(message: Message): Message {
  if (message.traceContext !== undefined) return message;
  const carrier = currentTraceCarrier();
  return carrier === undefined ? message : { ...message, traceContext: carrier };
}

/** The context a carrier describes (a remote parent), or the root context when there is none. */
export function contextOf(carrier: TraceCarrier | undefined): Context {
  if (carrier === undefined) return ROOT_CONTEXT;
  const headers: Record<string, string> = { traceparent: carrier.traceparent, ...(carrier.tracestate ? { tracestate: carrier.tracestate } : {}) };
  return propagation.extract(ROOT_CONTEXT, headers);
}

/** A link to the span a carrier names, when it names a valid one. */
export function linkTo(carrier: TraceCarrier | undefined): Link | undefined {
  const spanContext = trace.getSpanContext(contextOf(carrier));
  return spanContext && trace.isSpanContextValid(spanContext) ? { context: spanContext } : undefined;
}

/** A carrier as a string (a BullMQ job's `telemetry.metadata`), and back. */
export function serializeCarrier(carrier: TraceCarrier | undefined): string | undefined {
  return carrier === undefined ? undefined : JSON.stringify(carrier);
}

export function parseCarrier(text: string | undefined): TraceCarrier | undefined {
  if (text === undefined || text === "") return undefined;
  try {
    const value = JSON.parse(text) as Partial<TraceCarrier> | null;
    if (typeof value?.traceparent !== "string") return undefined;
    return { traceparent: value.traceparent, ...(typeof value.tracestate === "string" ? { tracestate: value.tracestate } : {}), ...(typeof value.sentAt === "number" ? { sentAt: value.sentAt } : {}) };
  } catch {
    return undefined;
  }
}

/** Starts a span that the caller ends (one that outlives a callback: a stream). It is not made active. */
export function startSpan(name: string, options: SpanOptions = {}): Span {
  return tracer().startSpan(name, spanOptionsOf(options), options.parent ?? context.active());
}

/**
 * Runs `work` in a new span, active for everything it awaits: children started inside are its
 * children, and what it publishes carries it. A throw is recorded on the span (status error) and
 * rethrown; the span ends when `work` settles.
 */
export async function inSpan<T>(name: string, options: SpanOptions, work: (span: Span) => Promise<T>): Promise<T> {
  const parent = options.parent ?? context.active();
  const span = tracer().startSpan(name, spanOptionsOf(options), parent);
  // Tracing off and no trace to continue: a span nobody records and nothing to carry, so the
  // context is not even switched (the common case costs a function call, not a context swap).
  if (!span.isRecording() && !trace.isSpanContextValid(span.spanContext())) return work(span);
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      return await work(span);
    } catch (error) {
      failSpan(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** Marks a span failed with the error (its type and message; no stack of secrets is added). */
export function failSpan(span: Span, error: unknown): void {
  if (!span.isRecording()) return;
  const exception = error instanceof Error ? error : new Error(String(error));
  span.recordException(exception);
  span.setStatus({ code: SpanStatusCode.ERROR, message: exception.message });
}

/** `{ trace_id, span_id }` of the active span, for a log line (pino's mixin); empty without one. */
export function activeTraceFields(): { trace_id?: string; span_id?: string } {
  const spanContext = trace.getSpanContext(context.active());
  if (!spanContext || !trace.isSpanContextValid(spanContext)) return {};
  return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
}

function spanOptionsOf(options: SpanOptions) {
  return {
    kind: options.kind ?? SpanKind.INTERNAL,
    ...(options.attributes ? { attributes: options.attributes } : {}),
    ...(options.links && options.links.length > 0 ? { links: options.links } : {}),
    ...(options.startTime !== undefined ? { startTime: options.startTime } : {}),
  };
}
