/**
 * The OpenTelemetry SDK for in-process tests: spans kept in memory (InMemorySpanExporter, exported
 * as each ends), AsyncLocalStorage for the active span and W3C trace context for propagation, the
 * way src/app/tracing.ts sets them up for a real process. `uninstall` puts the API's no-ops back.
 */
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, type SpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";

export interface TestTracing {
  /** Spans ended so far. */
  spans(): ReadableSpan[];
  named(name: string): ReadableSpan[];
  /** Resolves with the first span of that name once it has ended. */
  ended(name: string): Promise<ReadableSpan>;
  reset(): void;
  uninstall(): Promise<void>;
}

export function installTestTracing(): TestTracing {
  const exporter = new InMemorySpanExporter();
  const waiters: Array<{ name: string; resolve: (span: ReadableSpan) => void }> = [];
  const notifier: SpanProcessor = {
    onStart: () => undefined,
    onEnd(span) {
      for (const waiter of waiters.filter((candidate) => candidate.name === span.name)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(span);
      }
    },
    forceFlush: async () => undefined,
    shutdown: async () => undefined,
  };
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter }), notifier] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return {
    spans: () => exporter.getFinishedSpans(),
    named: (name) => exporter.getFinishedSpans().filter((span) => span.name === name),
    ended(name) {
      const [span] = exporter.getFinishedSpans().filter((candidate) => candidate.name === name);
      return span ? Promise.resolve(span) : new Promise((resolve) => waiters.push({ name, resolve }));
    },
    reset: () => exporter.reset(),
    async uninstall() {
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
