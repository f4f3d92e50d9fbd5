/**
 * Turns tracing on for a process when the standard `OTEL_*` variables ask for it
 * (./tracing-settings.ts): the OpenTelemetry SDK, an OTLP exporter (HTTP, protobuf or JSON) behind
 * a batching processor, AsyncLocalStorage for the active span, and W3C trace context for what
 * crosses processes. With tracing off (the default) none of the SDK's modules is even loaded: they
 * are imported here, dynamically, only once settings exist; the rest of the code speaks only to the
 * API (src/tracing.ts), whose no-ops stay in place. tests/unit/tracing-off.test.ts proves it.
 */
import type { Logger } from "pino";
import type * as SdkModule from "@opentelemetry/sdk-trace";
import { type TracingRole, type TracingSettings, tracingSettings } from "./tracing-settings.js";

export interface Tracing {
  /** Whether spans are recorded and exported. */
  readonly enabled: boolean;
  /** Exports what is still batched and takes the SDK's globals down (the API's no-ops return). */
  shutdown(): Promise<void>;
}

const OFF: Tracing = { enabled: false, shutdown: async () => undefined };

/** Starts tracing for a process of this role when the environment asks for it. */
export async function startTracing(role: TracingRole, logger: Logger, env: NodeJS.ProcessEnv = process.env): Promise<Tracing> {
  const settings = tracingSettings(role, env);
  if (!settings) return OFF;
  const [api, sdk, hooks, core, resources] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/context-async-hooks"),
    import("@opentelemetry/core"),
    import("@opentelemetry/resources"),
  ]);
  // The SDK says what went wrong (an export the collector refused) through diag: into the log.
  api.diag.setLogger(
    {
      error: (message, ...args) => logger.warn({ source: "opentelemetry", details: args }, message),
      warn: (message, ...args) => logger.warn({ source: "opentelemetry", details: args }, message),
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    { logLevel: api.DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const exporters = await Promise.all(settings.exporters.map((name) => exporterOf(name, settings, sdk, env)));
  const contextManager = new hooks.AsyncLocalStorageContextManager().enable();
  api.context.setGlobalContextManager(contextManager);
  api.propagation.setGlobalPropagator(new core.CompositePropagator({ propagators: [new core.W3CTraceContextPropagator(), new core.W3CBaggagePropagator()] }));
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the role's name.
  const resource = resources
    .resourceFromAttributes({ "service.name": settings.serviceName, "service.namespace": "countbot" })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new sdk.TracerProvider({
    resource,
    sampler: samplerOf(settings, sdk),
    spanProcessors: exporters.map((exporter) => new sdk.BatchSpanProcessor({ exporter, ...settings.batch })),
  });
  api.trace.setGlobalTracerProvider(provider);
  logger.info({ service: resource.attributes["service.name"], exporters: settings.exporters, protocol: settings.protocol, sampler: settings.sampler }, "tracing on");
  let closed = false;
  return {
    enabled: true,
    async shutdown() {
      if (closed) return;
      closed = true;
      await provider.shutdown().catch((error: unknown) => logger.warn({ err: error }, "tracing: exporting the last spans failed"));
      api.trace.disable();
      api.propagation.disable();
      api.context.disable();
      api.diag.disable();
    },
  };
}

type Sdk = typeof SdkModule;

async function exporterOf(name: "otlp" | "console", settings: TracingSettings, sdk: Sdk, env: NodeJS.ProcessEnv): Promise<SdkModule.SpanExporter> {
  if (name === "console") return new sdk.ConsoleSpanExporter();
  // The endpoint and headers come from `env`: the headers' variables hold a backend's key, so they
  // left process.env with the other secrets (src/app/secret-environment.ts). The exporter reads
  // the rest (_TIMEOUT, _COMPRESSION, _CERTIFICATE) itself.
  const config = { ...otlpUrl(env), ...otlpHeaders(env) };
  if (settings.protocol === "http/json") return new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter(config);
  return new (await import("@opentelemetry/exporter-trace-otlp-proto")).OTLPTraceExporter(config);
}

/** `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`; none: the exporter's default. */
function otlpUrl(env: NodeJS.ProcessEnv): { url?: string } {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return { url: traces };
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? { url: `${base.replace(/\/+$/, "")}/v1/traces` } : {};
}

/** `key=value,…` (values percent-encoded) of both headers variables, the traces one winning per key. */
function otlpHeaders(env: NodeJS.ProcessEnv): { headers?: Record<string, string> } {
  const headers: Record<string, string> = {};
  for (const name of ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"]) {
    for (const pair of (env[name] ?? "").split(",")) {
      const separator = pair.indexOf("=");
      if (separator <= 0) continue;
      const key = pair.slice(0, separator).trim();
      const value = pair.slice(separator + 1).trim();
      try {
        headers[key] = decodeURIComponent(value);
      } catch {
        headers[key] = value;
      }
    }
  }
  return Object.keys(headers).length > 0 ? { headers } : {};
}

function samplerOf(settings: TracingSettings, sdk: Sdk): SdkModule.Sampler {
  const ratio = new sdk.TraceIdRatioBasedSampler(settings.ratio);
  switch (settings.sampler) {
    case "always_on":
      return new sdk.AlwaysOnSampler();
    case "always_off":
      return new sdk.AlwaysOffSampler();
    case "traceidratio":
      return ratio;
    case "parentbased_always_on":
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
    case "parentbased_always_off":
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new sdk.ParentBasedSampler({ root: ratio });
  }
}
