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
import { ConfigError } from "../errors.js";
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
  /** The agent a turn goes to, and whether team triggers may take its messages. */
  agentFor(message: InboundMessage): { agent: Agent; intercept: boolean; profile: string };
  /** A non-default profile's job runners (its subagents and team agents run with these), while it is configured. */
  runnersOf(profile: string): JobRunners | undefined;
  /**
   * Applies a reloaded config: the routing rules and each profile's persona and MCP servers at
   * once; a profile added is built, one removed closed, one changed otherwise rebuilt, each alone
   * (the others' turns go on). Resolves once every profile is in place.
   */
  reload(config: ResolvedConfig): Promise<void>;
  close(): Promise<void>;
}

/** One non-default profile's agent and job runners, and what it was built from. */
interface BuiltProfile {
  runtime: AgentRuntime;
  runners: JobRunners;
  mcp: McpServers;
  /** The profile's section without its persona (which a reload applies in place). */
  fingerprint: string;
}

type ProfileParts = { main: Agent; jobs: Jobs; overrides: RuntimeOverrides };

/**
 * The agents of the profiles besides `default` (whose agent the worker builds as before), each
 * over the shared store, bus, budgets and audit log, with its own workspace, memory and MCP.
 */
export async function createProfileAgents(config: ResolvedConfig, logger: Logger, infrastructure: Infrastructure, parts: ProfileParts): Promise<ProfileAgents> {
  const built = new Map<string, BuiltProfile>();
  try {
    for (const id of otherProfiles(config)) built.set(id, await buildProfile(config, id, logger, infrastructure, parts));
  } catch (error) {
    for (const profile of built.values()) await closeProfile(profile);
    throw error;
  }
  let rules = config.routing;
  return {
    agentFor(message) {
      // A job's end goes to the profile that ran the job; anything else as the rules say.
      const own = message.channel === SYSTEM_CHANNEL ? message.metadata.profile : undefined;
      const profile = own !== undefined && (own === DEFAULT_PROFILE || built.has(own)) ? own : routeProfile(rules, routedMessageOf(message));
      const found = built.get(profile);
      return found ? { agent: found.runtime.agent, intercept: true, profile } : { agent: parts.main, intercept: true, profile: DEFAULT_PROFILE };
    },
    runnersOf: (profile) => built.get(profile)?.runners,
    async reload(next) {
      // New and changed profiles are built first, while the old ones serve; then the rules and the
      // profiles change together, so no chat meets a rule whose profile is not there yet.
      const wanted = new Set(otherProfiles(next));
      const fresh = new Map<string, BuiltProfile>();
      for (const id of wanted) {
        const current = built.get(id);
        if (current?.fingerprint === fingerprintOf(next, id)) continue;
        try {
          fresh.set(id, await buildProfile(next, id, logger, infrastructure, parts));
        } catch (error) {
          logger.error({ agent: id, err: error }, "agent profile could not be built; the old config stays in force for it");
        }
      }
      const retired = [...built].filter(([id]) => !wanted.has(id) || fresh.has(id));
      for (const [id] of retired) built.delete(id);
      for (const [id, profile] of fresh) built.set(id, profile);
      rules = next.routing;
      for (const [id, profile] of built) if (!fresh.has(id)) profile.runtime.reload(profileConfig(next, id));
      for (const [id, profile] of retired) {
        await closeProfile(profile);
        logger.info({ agent: id }, wanted.has(id) ? "agent profile rebuilt" : "agent profile removed");
      }
      for (const id of fresh.keys()) logger.info({ agent: id }, "agent profile ready");
    },
    async close() {
      for (const profile of built.values()) await closeProfile(profile);
      built.clear();
    },
  };
}

function otherProfiles(config: ResolvedConfig): string[] {
  return profileIds(config).filter((id) => id !== DEFAULT_PROFILE);
}

function fingerprintOf(config: ResolvedConfig, id: string): string {
  const { persona: _persona, ...rest } = config.agents[id] ?? {};
  const servers = profileConfig(config, id).tools.mcpServers;
  return JSON.stringify([rest, Object.keys(servers).sort()]);
}

async function closeProfile(profile: BuiltProfile): Promise<void> {
  await profile.runtime.close();
  await profile.mcp.close();
}

async function buildProfile(config: ResolvedConfig, id: string, logger: Logger, infrastructure: Infrastructure, parts: ProfileParts): Promise<BuiltProfile> {
  const { overrides } = parts;
  const own = profileConfig(config, id);
  const profileLogger = logger.child({ agent: id });
  await mkdir(own.workspace, { recursive: true });
  const workspace = await realpath(own.workspace);
  const model = overrides.model ?? instrumented(inProfile(id, () => resolveChatModel(own, { logger: profileLogger })), overrides.metrics);
  const mcp = createMcpServers(own, workspace, profileLogger);
  const auditRef: { log?: AuditLog } = {};
  const runners = createJobRunners({ ...own, workspace }, profileLogger, { model, workspace, budgets: overrides.budgets!, mcp, auditRef, overrides, profile: id });
  const runtime = await createAgentRuntime({ ...own, workspace }, profileLogger, {
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
    allowTeams: config.agents[id]?.teams,
    profile: id,
  });
  auditRef.log = runtime.audit;
  return { runtime, runners, mcp, fingerprint: fingerprintOf(config, id) };
}

/** A config error met while building profile `id`, said as that profile's: `agents.support: Unknown provider …`. */
function inProfile<T>(id: string, build: () => T): T {
  try {
    return build();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    throw new ConfigError(`agents.${id}: ${error.message}`, `agents.${id}.${error.path?.replace(/^agent\./, "") ?? "model"}`, { cause: error });
  }
}
