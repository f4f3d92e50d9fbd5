/**
 * startTracing takes its endpoint and headers from the environment it is handed (the one the CLI
 * kept when it withdrew the secret variables from process.env): an OTLP/JSON export reaches the
 * collector with the configured header, percent-decoded, and the role's service name. The headers'
 * variables count as secret ones, so they leave process.env like an API key.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTracing } from "../../../src/app/tracing.js";
import { withdrawSecrets } from "../../../src/app/secret-environment.js";
import { createLogger } from "../../../src/logger.js";
import { inSpan } from "../../../src/tracing.js";
import { type FakeOtlpCollector, startFakeOtlpCollector } from "../../support/fake-otlp-collector.js";

let collector: FakeOtlpCollector;
beforeAll(async () => {
  collector = await startFakeOtlpCollector();
});
afterAll(async () => {
  await collector?.close();
});

describe("startTracing", () => {
  it("exports to the endpoint of the environment it is given, with its headers", async () => {
    const lines: string[] = [];
    const logger = createLogger({ level: "info", destination: { write: (line: string) => lines.push(line) } as unknown as NodeJS.WritableStream });
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: `${collector.url}/`, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_EXPORTER_OTLP_HEADERS: "x-backend-key=k%3D1,x-team=ops", OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-team=traces" };
    const tracing = await startTracing("gateway", logger, env);
    expect(tracing.enabled).toBe(true);
    await inSpan("probe", {}, async () => undefined);
    await tracing.shutdown();
    const span = await collector.waitFor("the probe span", (spans) => spans.find((candidate) => candidate.name === "probe"));
    expect(span.service).toBe("countbot-gateway");
    const request = collector.requests.at(-1)!;
    expect(request.headers["x-backend-key"]).toBe("k=1");
    expect(request.headers["x-team"]).toBe("traces");
    expect(lines.join("")).not.toContain("k%3D1");
  });

  it("counts the OTLP headers variables as secret ones", () => {
    const env: NodeJS.ProcessEnv = { OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer abc", OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x=1", OTEL_SERVICE_NAME: "countbot" };
    const withdrawn = withdrawSecrets({ secrets: [], env, proc: "/nonexistent" });
    expect(withdrawn.names.sort()).toEqual(["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"]);
    expect(env).toEqual({ OTEL_SERVICE_NAME: "countbot" });
    expect(withdrawn.environment.OTEL_EXPORTER_OTLP_HEADERS).toBe("authorization=Bearer abc");
  });
});
