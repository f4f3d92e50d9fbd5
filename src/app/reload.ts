/**
 * Config reload without a restart. A SIGHUP (or `POST /api/config/reload`) makes a process read its
 * config again; a config that does not load is refused with one log line and the old one stays in
 * force. A reload that took is announced over the bus, so every other process of the deployment
 * reads its own config too (gateways and workers may run on other machines with their own files).
 *
 * What changes live: each channel's admission policy (allowlists, group policy, rate limit), the
 * platform accounts that take no webhook (added ones connect, removed ones stop), the routing rules,
 * the agent profiles besides `default` (added, removed or rebuilt, each alone), the
 * persona and the MCP servers (`tools.mcpServers`, `tools.mcpAllowedHosts`: added, removed or
 * changed servers are connected, closed or replaced) and the budgets and prices (`budgets`, from the
 * next model call on). Skills are read from the workspace as they
 * change. Everything else is logged as needing a restart.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { MessageBus, Subscription } from "../bus/message-bus.js";
import type { ResolvedConfig } from "../config/schema.js";
import { errorMessage } from "../errors.js";

const TOPIC = "countbot:control";

export interface ConfigReloader {
  /** Reads the config again; `{ ok: false, error }` when it does not load (nothing changed then). */
  reload(origin: "signal" | "api" | "bus"): Promise<{ ok: true; restartNeeded: string[] } | { ok: false; error: string }>;
  close(): Promise<void>;
}

export interface ConfigReloaderOptions {
  logger: Logger;
  bus: Pick<MessageBus, "broadcast" | "onBroadcast">;
  /** Loads the config anew (throws ConfigError on a bad one). */
  load: () => ResolvedConfig;
  initial: ResolvedConfig;
  /** Applies what can change live. */
  apply: (config: ResolvedConfig) => void;
}

export async function createConfigReloader(options: ConfigReloaderOptions): Promise<ConfigReloader> {
  const { logger, bus } = options;
  const instance = randomUUID();
  let current = options.initial;
  const reload: ConfigReloader["reload"] = async (origin) => {
    let next: ResolvedConfig;
    try {
      next = options.load();
    } catch (error) {
      const message = errorMessage(error).replace(/:\s*\n\s*/g, ": ").replace(/\s*\n\s*/g, "; ");
      logger.error({ origin }, `config reload refused, the old config stays in force: ${message}`);
      return { ok: false, error: message };
    }
    options.apply(next);
    const restartNeeded = changedSections(current, next);
    current = next;
    logger.info({ origin, restartNeeded }, restartNeeded.length > 0 ? "config reloaded; these sections change only with a restart" : "config reloaded");
    if (origin !== "bus") {
      await bus.broadcast(TOPIC, JSON.stringify({ type: "reload", from: instance })).catch((error: unknown) => logger.warn({ err: error }, "could not tell the other processes to reload"));
    }
    return { ok: true, restartNeeded };
  };
  const subscription: Subscription = await bus.onBroadcast(TOPIC, (payload) => {
    let message: { type?: string; from?: string };
    try {
      message = JSON.parse(payload) as typeof message;
    } catch {
      return;
    }
    if (message.type === "reload" && message.from !== instance) void reload("bus");
  });
  return { reload, close: () => subscription.close() };
}

/** Top-level sections (and `agent` fields) that differ, besides what a reload applies. */
function changedSections(before: ResolvedConfig, after: ResolvedConfig): string[] {
  const changed: string[] = [];
  for (const key of Object.keys(after) as Array<keyof ResolvedConfig>) {
    if (key === "channels" || key === "budgets" || key === "routing") continue;
    if (key === "agents") {
      // Profiles besides `default` are added, removed and rebuilt live; the default one's persona too.
      const { persona: _before, ...defaultBefore } = before.agents.default ?? {};
      const { persona: _after, ...defaultAfter } = after.agents.default ?? {};
      if (JSON.stringify(defaultBefore) !== JSON.stringify(defaultAfter)) changed.push("agents.default");
      continue;
    }
    if (key === "agent") {
      const { persona: _before, ...agentBefore } = before.agent;
      const { persona: _after, ...agentAfter } = after.agent;
      if (JSON.stringify(agentBefore) !== JSON.stringify(agentAfter)) changed.push("agent");
      continue;
    }
    if (key === "tools") {
      const { mcpServers: _serversBefore, mcpAllowedHosts: _hostsBefore, ...toolsBefore } = before.tools;
      const { mcpServers: _serversAfter, mcpAllowedHosts: _hostsAfter, ...toolsAfter } = after.tools;
      if (JSON.stringify(toolsBefore) !== JSON.stringify(toolsAfter)) changed.push("tools");
      continue;
    }
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) changed.push(key);
  }
  return changed;
}
