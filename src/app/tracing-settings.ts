/**
 * Whether and how a process traces, read from the standard OpenTelemetry variables (no SDK is
 * loaded to read them):
 *
 * - off unless an exporter is asked for: `OTEL_EXPORTER_OTLP_ENDPOINT` or
 *   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set (OTLP), or `OTEL_TRACES_EXPORTER=otlp|console`;
 * - off whatever else says so with `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`;
 * - OTLP over HTTP, `http/protobuf` (the default) or `http/json`, by `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`
 *   or `OTEL_EXPORTER_OTLP_PROTOCOL`; the exporter reads the endpoint, headers, timeout and
 *   compression variables itself;
 * - service name: `OTEL_SERVICE_NAME` (or `service.name` in `OTEL_RESOURCE_ATTRIBUTES`), else
 *   `countbot-<role>`;
 * - sampler: `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`);
 *   batching: `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_EXPORT_TIMEOUT`, `OTEL_BSP_MAX_QUEUE_SIZE`,
 *   `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`.
 *
 * A value that cannot work is a ConfigError naming the variable.
 */
import { ConfigError } from "../errors.js";

/** What the process is: its default service name is `countbot-<role>`, just `countbot` for the all-in-one `start`. */
export type TracingRole = "gateway" | "worker" | "start" | "agent";

export type SamplerName = "always_on" | "always_off" | "traceidratio" | "parentbased_always_on" | "parentbased_always_off" | "parentbased_traceidratio";

export interface TracingSettings {
  exporters: Array<"otlp" | "console">;
  protocol: "http/protobuf" | "http/json";
  /** The default `service.name`; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it. */
  serviceName: string;
  sampler: SamplerName;
  /** The ratio of the `*traceidratio` samplers. */
  ratio: number;
  batch: { scheduledDelayMillis?: number; exportTimeoutMillis?: number; maxQueueSize?: number; maxExportBatchSize?: number };
}

const SAMPLERS: readonly SamplerName[] = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"];

/** The settings, or undefined when tracing is off (the default). */
export function tracingSettings(role: TracingRole, env: NodeJS.ProcessEnv = process.env): TracingSettings | undefined {
  if (value(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return undefined;
  const exporters = exportersOf(env);
  if (exporters.length === 0) return undefined;
  return {
    exporters,
    protocol: protocolOf(env),
    serviceName: role === "start" ? "countbot" : `countbot-${role}`,
    ...samplerOf(env),
    batch: {
      ...positive(env, "OTEL_BSP_SCHEDULE_DELAY", "scheduledDelayMillis"),
      ...positive(env, "OTEL_BSP_EXPORT_TIMEOUT", "exportTimeoutMillis"),
      ...positive(env, "OTEL_BSP_MAX_QUEUE_SIZE", "maxQueueSize"),
      ...positive(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "maxExportBatchSize"),
    },
  };
}

function exportersOf(env: NodeJS.ProcessEnv): Array<"otlp" | "console"> {
  const listed = (value(env, "OTEL_TRACES_EXPORTER") ?? "").split(",").map((name) => name.trim().toLowerCase()).filter((name) => name !== "");
  if (listed.includes("none")) return [];
  if (listed.length === 0) return value(env, "OTEL_EXPORTER_OTLP_ENDPOINT") || value(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") ? ["otlp"] : [];
  for (const name of listed) {
    if (name !== "otlp" && name !== "console") throw new ConfigError(`OTEL_TRACES_EXPORTER: "${name}" is not an exporter CountBot has; use otlp, console or none`, "OTEL_TRACES_EXPORTER");
  }
  return [...new Set(listed as Array<"otlp" | "console">)];
}

function protocolOf(env: NodeJS.ProcessEnv): TracingSettings["protocol"] {
  const name = value(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = value(env, name) ?? "http/protobuf";
  if (protocol === "http/protobuf" || protocol === "http/json") return protocol;
  if (protocol === "grpc") throw new ConfigError(`${name}: grpc is not supported; use http/protobuf (a collector's port 4318) or http/json`, name);
  throw new ConfigError(`${name}: "${protocol}" is not an OTLP protocol; use http/protobuf or http/json`, name);
}

function samplerOf(env: NodeJS.ProcessEnv): { sampler: SamplerName; ratio: number } {
  const sampler = (value(env, "OTEL_TRACES_SAMPLER")?.toLowerCase() ?? "parentbased_always_on") as SamplerName;
  if (!SAMPLERS.includes(sampler)) throw new ConfigError(`OTEL_TRACES_SAMPLER: "${sampler}" is not one of ${SAMPLERS.join(", ")}`, "OTEL_TRACES_SAMPLER");
  const raw = value(env, "OTEL_TRACES_SAMPLER_ARG");
  const ratio = raw === undefined ? 1 : Number(raw);
  if (!(ratio >= 0 && ratio <= 1)) throw new ConfigError(`OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1, got "${raw}"`, "OTEL_TRACES_SAMPLER_ARG");
  return { sampler, ratio };
}

function positive<Key extends string>(env: NodeJS.ProcessEnv, name: string, key: Key): { [K in Key]?: number } {
  const raw = value(env, name);
  if (raw === undefined) return {};
  const number = Number(raw);
  if (!Number.isInteger(number) || number < 1) throw new ConfigError(`${name}: expected a whole number above 0, got "${raw}"`, name);
  return { [key]: number } as { [K in Key]?: number };
}

/** A variable's value; empty counts as unset (as the OpenTelemetry spec says). */
function value(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw === undefined || raw === "" ? undefined : raw;
}
