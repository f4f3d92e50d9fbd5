/** The OTEL_* variables CountBot reads itself: off by default, what turns it on, and errors that name the variable. */
import { describe, expect, it } from "vitest";
import { tracingSettings } from "../../../src/app/tracing-settings.js";
import { ConfigError } from "../../../src/errors.js";

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" };

describe("tracing settings", () => {
  it("is off without an exporter asked for, and when disabled or set to none", () => {
    expect(tracingSettings("worker", {})).toBeUndefined();
    expect(tracingSettings("worker", { OTEL_SERVICE_NAME: "x" })).toBeUndefined();
    expect(tracingSettings("worker", { ...ENDPOINT, OTEL_SDK_DISABLED: "TRUE" })).toBeUndefined();
    expect(tracingSettings("worker", { ...ENDPOINT, OTEL_TRACES_EXPORTER: "none" })).toBeUndefined();
    expect(tracingSettings("worker", { OTEL_EXPORTER_OTLP_ENDPOINT: "  " })).toBeUndefined();
  });

  it("turns on with either endpoint variable or an exporter, protobuf by default, named after the role", () => {
    expect(tracingSettings("gateway", ENDPOINT)).toMatchObject({ exporters: ["otlp"], protocol: "http/protobuf", serviceName: "countbot-gateway", sampler: "parentbased_always_on", ratio: 1, batch: {} });
    expect(tracingSettings("worker", { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:4318/v1/traces" })?.serviceName).toBe("countbot-worker");
    expect(tracingSettings("start", { OTEL_TRACES_EXPORTER: "console" })).toMatchObject({ exporters: ["console"], serviceName: "countbot" });
    expect(tracingSettings("worker", { ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json" })?.protocol).toBe("http/json");
    expect(tracingSettings("worker", { ...ENDPOINT, OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.25", OTEL_BSP_SCHEDULE_DELAY: "200" })).toMatchObject({
      sampler: "parentbased_traceidratio",
      ratio: 0.25,
      batch: { scheduledDelayMillis: 200 },
    });
  });

  it.each([
    [{ OTEL_TRACES_EXPORTER: "zipkin" }, "OTEL_TRACES_EXPORTER"],
    [{ ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, "OTEL_EXPORTER_OTLP_PROTOCOL"],
    [{ ...ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "thrift" }, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"],
    [{ ...ENDPOINT, OTEL_TRACES_SAMPLER: "sometimes" }, "OTEL_TRACES_SAMPLER"],
    [{ ...ENDPOINT, OTEL_TRACES_SAMPLER_ARG: "2" }, "OTEL_TRACES_SAMPLER_ARG"],
    [{ ...ENDPOINT, OTEL_BSP_SCHEDULE_DELAY: "soon" }, "OTEL_BSP_SCHEDULE_DELAY"],
  ])("refuses %o, naming %s", (env, variable) => {
    let thrown: unknown;
    try {
      tracingSettings("worker", env);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).message).toContain(variable);
    expect((thrown as ConfigError).path).toBe(variable);
  });
});
