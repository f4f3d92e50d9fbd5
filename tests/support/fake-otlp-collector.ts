/**
 * A fake OpenTelemetry collector: OTLP over HTTP on 127.0.0.1 (`POST /v1/traces`), as the real
 * exporters send it. JSON bodies (`http/json`) are decoded into spans; protobuf bodies
 * (`http/protobuf`) are kept raw, with their content type, for tests that look for bytes in them.
 * Answers 200 with an empty ExportTraceServiceResponse, as a collector does.
 */
import { EventEmitter } from "node:events";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number; arrayValue?: { values?: AnyValue[] } };
interface KeyValue {
  key: string;
  value: AnyValue;
}

/** One span as the collector received it, with its resource's service name and attributes flattened. */
export interface CollectedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string }>;
  status?: { code?: number; message?: string };
}

export interface CollectedRequest {
  path: string;
  contentType: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface FakeOtlpCollector {
  /** The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends `/v1/traces`). */
  url: string;
  spans: CollectedSpan[];
  requests: CollectedRequest[];
  /** Resolves with the spans once `check` finds what it wants in them (checked on every request). */
  waitFor<T>(what: string, check: (spans: CollectedSpan[]) => T | undefined, timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

export async function startFakeOtlpCollector(): Promise<FakeOtlpCollector> {
  const spans: CollectedSpan[] = [];
  const requests: CollectedRequest[] = [];
  const received = new EventEmitter();
  const server = createServer((request, response) => void handle(request, response));

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const contentType = String(request.headers["content-type"] ?? "");
    if (request.method !== "POST" || request.url !== "/v1/traces") {
      response.writeHead(404).end();
      return;
    }
    requests.push({ path: request.url, contentType, headers: request.headers, body });
    if (contentType.startsWith("application/json")) spans.push(...spansOf(JSON.parse(body.toString("utf8")) as ExportRequest));
    response.writeHead(200, { "content-type": contentType.startsWith("application/json") ? "application/json" : "application/x-protobuf" });
    response.end(contentType.startsWith("application/json") ? "{}" : Buffer.alloc(0));
    received.emit("request");
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    waitFor(what, check, timeoutMs = 30_000) {
      const found = check(spans);
      if (found !== undefined) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const onRequest = () => {
          const value = check(spans);
          if (value === undefined) return;
          clearTimeout(timer);
          received.off("request", onRequest);
          resolve(value);
        };
        const timer = setTimeout(() => {
          received.off("request", onRequest);
          reject(new Error(`the collector did not receive ${what}; it has: ${spans.map((span) => `${span.service}/${span.name}`).join(", ")}`));
        }, timeoutMs);
        received.on("request", onRequest);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: KeyValue[];
        links?: Array<{ traceId: string; spanId: string }>;
        status?: { code?: number; message?: string };
      }>;
    }>;
  }>;
}

function spansOf(request: ExportRequest): CollectedSpan[] {
  return (request.resourceSpans ?? []).flatMap((resourceSpans) => {
    const service = String(attributesOf(resourceSpans.resource?.attributes)["service.name"] ?? "");
    return (resourceSpans.scopeSpans ?? []).flatMap((scope) =>
      (scope.spans ?? []).map((span) => ({
        service,
        traceId: span.traceId,
        spanId: span.spanId,
        ...(span.parentSpanId ? { parentSpanId: span.parentSpanId } : {}),
        name: span.name,
        kind: span.kind,
        attributes: attributesOf(span.attributes),
        links: (span.links ?? []).map((link) => ({ traceId: link.traceId, spanId: link.spanId })),
        ...(span.status ? { status: span.status } : {}),
      })),
    );
  });
}

function attributesOf(list: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((entry) => [entry.key, valueOf(entry.value)]));
}

function valueOf(value: AnyValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(valueOf);
  return undefined;
}
