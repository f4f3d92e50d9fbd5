/**
 * The OpenTelemetry SDK for in-process tests: spans kept in memory (InMemorySpanExporter, exported
 * as each ends), AsyncLocalStorage for the active span and W3C trace context for propagation, the
 * way src/app/tracing.ts sets them up for a real process. `uninstall` puts the API's no-ops back.
 */
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";

export interface TestTracing {
  /** Spans ended so far. */
  spans(): ReadableSpan[];
  named(name: string): ReadableSpan[];
  reset(): void;
  uninstall(): Promise<void>;
}

export function installTestTracing(): TestTracing {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return {
    spans: () => exporter.getFinishedSpans(),
    named: (name) => exporter.getFinishedSpans().filter((span) => span.name === name),
    reset: () => exporter.reset(),
    async uninstall() {
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
