/**
 * The gateway half of CountBot: channel connectors and the HTTP API, publishing inbound messages
 * to the bus and delivering what the workers publish back.
 */
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { MessageBus } from "../bus/types.js";
import type { ResolvedConfig } from "../config/schema.js";
import { type ApiServer, type Readiness, createApiServer } from "../api/server.js";

export interface Gateway {
  api: ApiServer;
  start(): Promise<{ url: string; port: number }>;
  close(): Promise<void>;
}

export interface GatewayOptions {
  config: ResolvedConfig;
  logger: Logger;
  bus: MessageBus;
  /** Present when the deployment runs on Redis: readiness then includes a PING. */
  redis?: Redis;
  /** Extra readiness checks (the embedded worker's lease renewals, say). */
  checks?: () => Promise<Readiness["checks"]>;
}

export function createGateway(options: GatewayOptions): Gateway {
  const { config, logger, bus, redis } = options;
  const readiness = async (): Promise<Readiness> => {
    const checks: Readiness["checks"] = {};
    if (redis) {
      try {
        checks.redis = { ok: (await redis.ping()) === "PONG" };
      } catch (error) {
        checks.redis = { ok: false, detail: error instanceof Error ? error.message : String(error) };
      }
    }
    Object.assign(checks, (await options.checks?.()) ?? {});
    return { ready: Object.values(checks).every((check) => check.ok), checks };
  };
  const api = createApiServer({ bus, config: config.api, logger, readiness });
  return {
    api,
    start: () => api.listen(),
    close: () => api.close(),
  };
}
