/**
 * Off by default, and then truly off: a process without OTEL_* variables loads the whole CLI and
 * starts tracing as a worker does, and the only OpenTelemetry package it loads is the API (whose
 * no-ops the code speaks to). With an endpoint set, the same probe loads the SDK and the protobuf
 * exporter, and the span reaches a fake collector as `application/x-protobuf` (the default
 * protocol) holding the span's trace id. Its log line inside the span names that trace.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOtlpCollector, startFakeOtlpCollector } from "../../support/fake-otlp-collector.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const probe = path.join(root, "tests", "support", "tracing-probe.mjs");

interface ProbeResult {
  loaded: string[];
  enabled: boolean;
  traceId: string | null;
  stderr: string;
}

/** Runs the probe with the environment less any OTEL_* variable, plus `extra`. */
function runProbe(extra: Record<string, string>): Promise<ProbeResult> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("OTEL_")));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [probe, root], { cwd: root, env: { ...env, ...extra }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`the probe exited with ${code}:\n${stderr}`));
      resolve({ ...(JSON.parse(stdout.trim().split("\n").at(-1)!) as Omit<ProbeResult, "stderr">), stderr });
    });
  });
}

let collector: FakeOtlpCollector;
beforeAll(async () => {
  collector = await startFakeOtlpCollector();
});
afterAll(async () => {
  await collector?.close();
});

describe("tracing off by default", () => {
  it("loads no OpenTelemetry SDK module without OTEL_* variables: only the API", { timeout: 120_000 }, async () => {
    const result = await runProbe({});
    expect(result.enabled).toBe(false);
    expect(result.loaded).toEqual(["api"]);
    expect(result.traceId).toBeNull();
    expect(result.stderr).not.toContain("trace_id");
  });

  it("loads none either when OTEL_SDK_DISABLED says so, though an endpoint is set", { timeout: 120_000 }, async () => {
    const result = await runProbe({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SDK_DISABLED: "true" });
    expect(result.loaded).toEqual(["api"]);
    expect(collector.requests).toHaveLength(0);
  });

  it("loads the SDK with an endpoint, and exports protobuf by default", { timeout: 120_000 }, async () => {
    const result = await runProbe({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url });
    expect(result.enabled).toBe(true);
    expect(result.loaded).toEqual(expect.arrayContaining(["sdk-trace", "exporter-trace-otlp-proto", "context-async-hooks"]));
    expect(result.loaded).not.toContain("exporter-trace-otlp-http");
    expect(result.traceId).toMatch(/^[0-9a-f]{32}$/);
    const request = collector.requests.at(-1)!;
    expect(request.contentType).toBe("application/x-protobuf");
    expect(request.body.includes(Buffer.from(result.traceId!, "hex"))).toBe(true);
    expect(request.body.includes(Buffer.from("countbot-worker"))).toBe(true);
    expect(result.stderr).toContain(`"trace_id":"${result.traceId}"`);
  });
});
