/**
 * The gateway half of CountBot: channel connectors and the HTTP API, publishing inbound messages
 * to the bus and delivering what the workers publish back.
 */
import type { Logger } from "pino";
import type { RedisClient } from "../redis/client.js";
import type { MessageBus } from "../bus/message-bus.js";
import type { ResolvedConfig } from "../config/schema.js";
import { createHash } from "node:crypto";
import path from "node:path";
import { type ChannelRuntime, createChannelRuntime } from "./channel-runtime.js";
import { createTelegramAdapter } from "../../channels/telegram/telegram-adapter.js";
import { registerPairingRoutes } from "../api/pairing-routes.js";
import { registerTaskRoutes } from "../api/task-routes.js";
import { registerToolHistoryRoutes } from "../api/tool-history-routes.js";
import { createToolHistory } from "../tools/tool-history.js";
import type { SubagentManager } from "../jobs/subagents/manager.js";
import { type ApiServer, type Readiness, createApiServer } from "../api/server.js";
import { ConfigError } from "../errors.js";
import type { Store } from "../store/store.js";

export interface Gateway {
  api: ApiServer;
  channels: ChannelRuntime[];
  start(): Promise<{ url: string; port: number }>;
  close(): Promise<void>;
}

export interface GatewayOptions {
  config: ResolvedConfig;
  logger: Logger;
  bus: MessageBus;
  /** Present when the deployment runs on Redis: readiness then includes a PING. */
  redis?: RedisClient;
  /** Extra readiness checks (the embedded worker's lease renewals, say). */
  checks?: () => Promise<Readiness["checks"]>;
  store: Store;
  /** Cancels subagent tasks wherever they run (the tasks API). */
  subagents: Pick<SubagentManager, "cancel">;
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
  // Read-only here: workers write it under the shared data directory.
  const toolHistory = createToolHistory({ directory: path.join(config.dataDir, "tool-history") });
  const channels: ChannelRuntime[] = [];
  const webhooks: NonNullable<Parameters<typeof createApiServer>[0]["webhooks"]> = [];
  const telegram = config.channels.telegram;
  if (telegram?.enabled) {
    if (!telegram.token) throw new ConfigError("channels.telegram is enabled but has no token: set TELEGRAM_BOT_TOKEN or channels.telegram.token", "channels.telegram.token");
    const adapter = createTelegramAdapter({
      token: telegram.token,
      apiRoot: telegram.apiRoot,
      mode: telegram.mode,
      webhook: telegram.webhook?.url && telegram.webhook.secret ? { url: telegram.webhook.url, secret: telegram.webhook.secret, path: telegram.webhook.path } : undefined,
      maxFileBytes: telegram.maxFileBytes,
      downloadDir: path.join(config.dataDir, "media", "telegram"),
      logger,
    });
    if (telegram.mode === "webhook") webhooks.push({ path: telegram.webhook?.path ?? "/telegram/webhook", handle: (headers, body) => adapter.handleWebhook(headers, body) });
    channels.push(
      createChannelRuntime({
        adapter,
        // The account is named by a hash of the token: the token itself must not become a key.
        account: createHash("sha256").update(telegram.token).digest("hex").slice(0, 16),
        policy: { allowFrom: telegram.allowFrom, groupPolicy: telegram.groupPolicy, rateLimit: { messages: telegram.rateLimitPerMinute, perMs: 60_000 } },
        bus,
        store: options.store,
        logger,
        redis,
        prefix: config.redis.prefix,
        botUsername: () => adapter.identity?.username,
        // Telegram's private chats have positive ids; groups and channels negative ones.
        isPrivateChat: (chatId) => Number(chatId) > 0,
      }),
    );
  }
  const api = createApiServer({
    bus,
    config: config.api,
    logger,
    readiness,
    webhooks,
    routes: (scope) => {
      registerPairingRoutes(scope, options.store);
      registerTaskRoutes(scope, { tasks: options.store.tasks, cancel: (id) => options.subagents.cancel(id) });
      registerToolHistoryRoutes(scope, toolHistory);
    },
  });
  return {
    api,
    channels,
    async start() {
      const address = await api.listen();
      for (const channel of channels) await channel.start();
      return address;
    },
    async close() {
      for (const channel of channels) await channel.stop();
      await api.close();
      await toolHistory.close();
    },
  };
}
