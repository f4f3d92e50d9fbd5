/**
 * The web channel as the gateway runs it, for tests: the adapter on the shared channel runtime
 * (admission, dispatcher) and the API server serving its routes.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { WebConfigSchema, webChannelOf } from "../../channels/web/plugin.js";
import { WebAdapter, type WebAdapterOptions } from "../../channels/web/web-adapter.js";
import { type ApiServer, type Readiness, createApiServer } from "../../src/api/server.js";
import type { MessageBus } from "../../src/bus/message-bus.js";
import { type ChannelRuntime, createChannelRuntime } from "../../src/gateway/channel-runtime.js";
import { createFileStore } from "../../src/store/file-store.js";

export interface WebGateway {
  adapter: WebAdapter;
  server: ApiServer;
  runtime: ChannelRuntime;
  url: string;
  /** Stops the channel, then the server. */
  close(): Promise<void>;
}

export interface WebGatewayOptions extends Partial<Omit<WebAdapterOptions, "bus">> {
  bus: MessageBus;
  token?: string;
  host?: string;
  allowedOrigins?: string[];
  readiness?: () => Promise<Readiness>;
  rateLimitPerMinute?: number;
}

export async function startWebGateway(options: WebGatewayOptions): Promise<WebGateway> {
  const logger = options.logger ?? pino({ level: "silent" });
  const dataDir = await mkdtemp(path.join(tmpdir(), "countbot-web-"));
  const store = createFileStore({ dataDir });
  const adapter = new WebAdapter({ ...options, logger });
  const config = WebConfigSchema.parse({ rateLimitPerMinute: options.rateLimitPerMinute });
  const channel = webChannelOf(adapter, config);
  const runtime = createChannelRuntime({ channel, bus: options.bus, store, logger });
  const server = createApiServer({
    bus: options.bus,
    config: { host: options.host ?? "127.0.0.1", port: 0, token: options.token, allowedOrigins: options.allowedOrigins },
    logger,
    readiness: options.readiness ?? (async () => ({ ready: true, checks: {} })),
    routes: [channel.routes!],
  });
  const { url } = await server.listen();
  await runtime.start();
  // The runtime starts the adapter in the background: wait until it takes messages.
  while (!adapter.running) await new Promise((resolve) => setTimeout(resolve, 2));
  let closed: Promise<void> | undefined;
  return {
    adapter,
    server,
    runtime,
    url,
    close() {
      closed ??= (async () => {
        await runtime.stop();
        await server.close();
        await store.close();
        await rm(dataDir, { recursive: true, force: true });
      })();
      return closed;
    },
  };
}
