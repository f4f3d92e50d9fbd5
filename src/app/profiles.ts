/**
 * Agent profiles in a worker (src/config/agents.ts): one agent per profile, each on the config the
 * profile makes of the deployment's (persona, models, tools, MCP servers, workspace, memory), and
 * the routing that picks one per turn.
 *
 * Isolation: a profile's file tools stay inside its own workspace (workspaces may not overlap:
 * config loading refuses it), its long-term and person memory live in its own namespace (Redis
 * keys `{prefix}:agents:<id>:memory:…`; files under its workspace), and its MCP connections are
 * its own. The subagents and team runs it starts run as it too (job-runners.ts): in its workspace,
 * on its tools and models.
 */
import { mkdir, realpath } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "pino";
import type { Agent } from "../agent/agent.js";
import type { InboundMessage } from "../bus/message.js";
import { SYSTEM_CHANNEL } from "../bus/message.js";
import { DEFAULT_PROFILE, type RoutedMessage, profileIds, routeProfile } from "../config/agents.js";
import type { ResolvedConfig } from "../config/schema.js";
import { resolveChatModel } from "../providers/factory.js";
import type { Jobs } from "../jobs/jobs.js";
import type { AuditLog } from "../tools/audit-log.js";
import type { McpServers } from "../tools/mcp/mcp-servers.js";
import { type AgentRuntime, type RuntimeOverrides, createAgentRuntime, createMcpServers, instrumented } from "./agent.js";
import { type JobRunners, createJobRunners } from "./job-runners.js";
import type { Infrastructure } from "./infrastructure.js";

/** The deployment's config as profile `id` sees it. `default` without `agents.default`: the config itself. */
export function profileConfig(config: ResolvedConfig, id: string): ResolvedConfig {
  const profile = config.agents[id];
  if (profile === undefined) return config;
  const servers = profile.mcpServers;
  return {
    ...config,
    workspace: profile.workspace ?? (id === DEFAULT_PROFILE ? config.workspace : path.join(config.dataDir, "agents", id, "workspace")),
    agent: {
      ...config.agent,
      persona: profile.persona ?? config.agent.persona,
      model: profile.model ?? config.agent.model,
      fallbackModels: profile.fallbackModels ?? config.agent.fallbackModels,
    },
    memory: { ...config.memory, scope: profile.memory?.scope ?? config.memory.scope },
    tools: {
      ...config.tools,
      mcpServers: servers === undefined ? config.tools.mcpServers : Object.fromEntries(Object.entries(config.tools.mcpServers).filter(([name]) => servers.includes(name))),
    },
  };
}

/** The message a routing rule looks at: a background completion (`system`) stands for the chat it names. */
export function routedMessageOf(message: InboundMessage): RoutedMessage {
  if (message.channel !== SYSTEM_CHANNEL) {
    return { channel: message.channel, chatId: message.chatId, senderId: message.senderId, chatType: message.chatType, parentChatId: message.metadata.parentChatId };
  }
  const colon = message.chatId.indexOf(":");
  return { channel: message.chatId.slice(0, colon), chatId: message.chatId.slice(colon + 1) };
}

export interface ProfileAgents {
  /** The agent a turn goes to, and whether team triggers may take its messages (the default profile's only). */
  agentFor(message: InboundMessage): { agent: Agent; intercept: boolean; profile: string };
  /** Each non-default profile's job runners: its subagents and team agents run with these. */
  runners: ReadonlyMap<string, JobRunners>;
  /** Applies a reloaded config's persona and MCP servers to each profile's agent. */
  reload(config: ResolvedConfig): void;
  close(): Promise<void>;
}

/**
 * The agents of the profiles besides `default` (whose agent the worker builds as before), each
 * over the shared store, bus, budgets and audit log, with its own workspace, memory and MCP.
 */
export async function createProfileAgents(
  config: ResolvedConfig,
  logger: Logger,
  infrastructure: Infrastructure,
  parts: { main: Agent; jobs: Jobs; overrides: RuntimeOverrides },
): Promise<ProfileAgents> {
  const { overrides } = parts;
  const runtimes = new Map<string, AgentRuntime>();
  const runners = new Map<string, JobRunners>();
  const connections: McpServers[] = [];
  for (const id of profileIds(config).filter((candidate) => candidate !== DEFAULT_PROFILE)) {
    const own = profileConfig(config, id);
    const profileLogger = logger.child({ agent: id });
    await mkdir(own.workspace, { recursive: true });
    const workspace = await realpath(own.workspace);
    const model = overrides.model ?? instrumented(resolveChatModel(own, { logger: profileLogger }), overrides.metrics);
    const mcp = createMcpServers(own, workspace, profileLogger);
    connections.push(mcp);
    const auditRef: { log?: AuditLog } = {};
    runners.set(id, createJobRunners({ ...own, workspace }, profileLogger, { model, workspace, budgets: overrides.budgets!, mcp, auditRef, overrides }));
    runtimes.set(
      id,
      await createAgentRuntime({ ...own, workspace }, profileLogger, {
        ...overrides,
        model,
        store: infrastructure.store,
        memory: infrastructure.memory({ workspace, scope: own.memory.scope, namespace: id }),
        people: infrastructure.memory({ workspace, scope: "person", namespace: id }),
        toolHistory: (secrets) => infrastructure.toolHistory({ secrets }),
        audit: (options) => infrastructure.auditLog(options),
        bus: infrastructure.bus,
        jobs: parts.jobs,
        mcp,
        allowTools: config.agents[id]?.tools,
        profile: id,
      }),
    );
    auditRef.log = runtimes.get(id)!.audit;
  }
  let rules = config.routing;
  return {
    agentFor(message) {
      // A job's end goes to the profile that ran the job; anything else as the rules say.
      const own = message.channel === SYSTEM_CHANNEL ? message.metadata.profile : undefined;
      const profile = own !== undefined && (own === DEFAULT_PROFILE || runtimes.has(own)) ? own : routeProfile(rules, routedMessageOf(message));
      const runtime = runtimes.get(profile);
      return runtime ? { agent: runtime.agent, intercept: true, profile } : { agent: parts.main, intercept: true, profile: DEFAULT_PROFILE };
    },
    runners,
    reload(next) {
      rules = next.routing;
      for (const [id, runtime] of runtimes) if (id in next.agents) runtime.reload(profileConfig(next, id));
    },
    async close() {
      for (const runtime of runtimes.values()) await runtime.close();
      for (const mcp of connections) await mcp.close();
    },
  };
}
