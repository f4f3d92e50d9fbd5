/**
 * The gateway half of the composition root: every enabled channel from the plugin registry on the
 * shared channel runtime, and the HTTP API with the channels' routes and webhooks, pairing, tasks
 * and tool history.
 */
import type { Logger } from "pino";
import { channelPlugins } from "../../channels/index.js";
import { registerPairingRoutes } from "../api/pairing-routes.js";
import { type ApiServer, type Readiness, createApiServer } from "../api/server.js";
import { registerTaskRoutes } from "../api/task-routes.js";
import { registerToolHistoryRoutes } from "../api/tool-history-routes.js";
import type { ResolvedConfig } from "../config/schema.js";
import { ConfigError, errorMessage } from "../errors.js";
import type { ChannelConfig, ChannelDependencies, ChannelInstance, ChannelPlugin } from "../gateway/channel.js";
import { type ChannelRuntime, createChannelRuntime } from "../gateway/channel-runtime.js";
import type { SubagentManager } from "../jobs/subagents/manager.js";
import { type ChatEventLog, createMemoryChatEventLog } from "../store/chat-event-log.js";
import type { Infrastructure } from "./infrastructure.js";
import { type PrometheusMetrics, registerMetricsRoute } from "./metrics.js";

export interface Gateway {
  api: ApiServer;
  channels: ChannelRuntime[];
  start(): Promise<{ url: string; port: number }>;
  close(): Promise<void>;
}

export interface GatewayOptions {
  config: ResolvedConfig;
  logger: Logger;
  infrastructure: Pick<Infrastructure, "bus" | "store" | "elect" | "checks" | "toolHistory" | "chatEvents">;
  /** Extra readiness checks (the embedded worker's, say). */
  checks?: () => Promise<Readiness["checks"]>;
  /** Cancels subagent tasks wherever they run (the tasks API). */
  subagents: Pick<SubagentManager, "cancel">;
  /** The platforms to offer. Default: every plugin in `channels/index.ts`. */
  plugins?: readonly ChannelPlugin[];
  /** Served at `/metrics` (behind the token) and fed by the channels. */
  metrics?: PrometheusMetrics;
  now?: () => number;
}

/** The channels whose config section says `enabled`, each built by its plugin. Throws ConfigError. */
export function createChannels(
  config: ResolvedConfig,
  logger: Logger,
  bus: ChannelDependencies["bus"],
  plugins: readonly ChannelPlugin[],
  now?: () => number,
  eventLogOf: (channel: string) => ChatEventLog = () => createMemoryChatEventLog(),
): ChannelInstance[] {
  const instances: ChannelInstance[] = [];
  for (const plugin of plugins) {
    // Loading validated the section against the plugin's schema; a missing section takes the
    // schema's defaults when it has them (the web chat is on unless switched off).
    const raw = config.channels[plugin.name];
    const parsed = plugin.configSchema.safeParse(raw);
    if (!parsed.success) {
      if (raw === undefined) continue;
      throw new ConfigError(`channels.${plugin.name}: ${parsed.error.issues[0]?.message ?? "invalid"}`, `channels.${plugin.name}`);
    }
    const section: ChannelConfig = parsed.data;
    if (!section.enabled) continue;
    instances.push(plugin.create(section, { logger, dataDir: config.dataDir, bus, events: eventLogOf(plugin.name), now }));
  }
  return instances;
}

export function createGateway(options: GatewayOptions): Gateway {
  const { config, logger, infrastructure } = options;
  const { bus, store } = infrastructure;
  const readiness = async (): Promise<Readiness> => {
    const checks: Readiness["checks"] = { ...(await infrastructure.checks()), ...((await options.checks?.()) ?? {}) };
    return { ready: Object.values(checks).every((check) => check.ok), checks };
  };
  // Read-only here: workers write it (in Redis, or under this process's data directory when embedded).
  const toolHistory = infrastructure.toolHistory();
  const instances = createChannels(config, logger, bus, options.plugins ?? channelPlugins, options.now, (channel) => infrastructure.chatEvents(channel));
  const { metrics } = options;
  const channels = instances.map((channel) => createChannelRuntime({ channel, bus, store, logger, elect: infrastructure.elect, metrics }));
  metrics?.watch({ bus, leaders: () => channels.map((channel) => ({ name: channel.name, leading: channel.leading })) });
  const api = createApiServer({
    bus,
    config: config.api,
    logger,
    readiness,
    webhooks: instances.flatMap((channel) => (channel.webhook ? [channel.webhook] : [])),
    routes: [
      ...instances.flatMap((channel) => (channel.routes ? [channel.routes] : [])),
      (scope) => {
        registerPairingRoutes(scope, store);
        registerTaskRoutes(scope, { tasks: store.tasks, cancel: (id) => options.subagents.cancel(id) });
        registerToolHistoryRoutes(scope, toolHistory);
        if (metrics) registerMetricsRoute(scope, metrics);
      },
    ],
  });
  return {
    api,
    channels,
    async start() {
      const address = await api.listen();
      try {
        for (const channel of channels) await channel.start();
      } catch (error) {
        await api.close();
        throw new Error(`a channel failed to start: ${errorMessage(error)}`, { cause: error });
      }
      return address;
    },
    async close() {
      for (const channel of channels) await channel.stop();
      await api.close();
      await toolHistory.close();
    },
  };
}
