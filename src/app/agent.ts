/**
 * The agent half of the composition root: the agent with its model, tools, memory and context
 * (`countbot agent`, and each agent profile's in a worker: worker.ts, profiles.ts).
 */
import { guardForAgent } from "../budget/guard.js";
import { DEFAULT_PROFILE } from "../config/agents.js";
import { mkdir, realpath } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "pino";
import { Agent } from "../agent/agent.js";
import { ContextBuilder } from "../agent/context-builder.js";
import { type MemoryStore, createFileMemoryStore } from "../memory/memory.js";
import { createMemoryTool } from "../agent/memory-tool.js";
import { type PersonMemory, createPersonMemory } from "../memory/person-memory.js";
import type { MessageBus } from "../bus/message-bus.js";
import { collectSecrets } from "../config/mask.js";
import type { ResolvedConfig } from "../config/schema.js";
import { createCronTool } from "../jobs/cron/cron-tool.js";
import type { Jobs } from "../jobs/jobs.js";
import { createSpawnTool } from "../jobs/subagents/spawn-tool.js";
import type { Metrics } from "../metrics.js";
import { createWorkflowRunTool } from "../jobs/workflows/workflow-run-tool.js";
import { resolveChatModel } from "../providers/factory.js";
import { instrumentModel } from "../providers/instrumented-model.js";
import { traceModel } from "../providers/traced-model.js";
import type { ChatModel } from "../providers/chat-model.js";
import { createFileStore } from "../store/file-store.js";
import type { Store } from "../store/store.js";
import { type AuditLineOptions, type AuditLog, createFileAuditLog } from "../tools/audit-log.js";
import { brokenSandboxMessage, chooseSandbox, probeBwrap } from "../tools/exec-sandbox.js";
import { createMessageTool } from "../tools/message.js";
import type { ToolRegistry } from "../tools/registry.js";
import { type ToolHistory, createFileToolHistory } from "../tools/tool-history.js";
import { McpServers } from "../tools/mcp/mcp-servers.js";
import { createToolSet } from "../tools/tool-set.js";
import type { Tool, ToolSource } from "../tools/tool.js";
import { fileAuditOptions, ledgerFile } from "./infrastructure.js";
import { createMemoryBudgetLedger } from "../store/memory-budget-ledger.js";
import { type ProcessBudgets, createProcessBudgets } from "./budgets.js";

export interface AgentRuntime {
  config: ResolvedConfig;
  /** Every tool call, when `tools.audit.enabled`. */
  audit?: AuditLog;
  agent: Agent;
  model: ChatModel;
  tools: ToolRegistry;
  store: Store;
  workspace: string;
  /** What the exec tool runs in, in a few words for a banner ("bubblewrap (no network, own PID namespace)", "off", ...). */
  sandbox: string;
  /** Applies what changes live (the persona) from the next turn on. */
  reload(config: ResolvedConfig): void;
  close(): Promise<void>;
}

export interface RuntimeOverrides {
  /** Use this model instead of the configured providers (tests, benchmarks). */
  model?: ChatModel;
  store?: Store;
  /** Long-term memory; default: `MEMORY.md` files in the workspace. */
  memory?: MemoryStore;
  /** Person memory (scope `person`); default: `MEMORY.md` files under the workspace's memory/people. */
  people?: MemoryStore;
  /** The audit log (when `tools.audit.enabled`); default: the rotated file under the data directory. */
  audit?: (options: AuditLineOptions) => AuditLog;
  /** Where tool calls are recorded per session; default: JSONL files under the data directory. */
  toolHistory?: (secrets: readonly string[]) => ToolHistory;
  /** Lets the message tool reach chats other than the current one. */
  bus?: MessageBus;
  /** Subagents and scheduled messages: adds the spawn and cron tools. */
  jobs?: Jobs;
  /** Counts turns, model calls and tool calls. */
  metrics?: Metrics;
  /** The MCP servers' connections, shared with subagents and team agents; default: this runtime's own. */
  mcp?: McpServers;
  /** Budgets and the usage report; default: over this process's ledger file. */
  budgets?: ProcessBudgets;
  /** The tool names offered (an agent profile's `tools`); default: every tool the config enables. */
  allowTools?: readonly string[];
  /** The agent profile this runtime is (absent: `default`): its subagents and team runs run as it. */
  profile?: string;
  /** The teams its workflow_run tool may start (a profile's `teams`); default all. */
  allowTeams?: readonly string[];
  now?: () => number;
}

/** The process's MCP connections, as configured (connected on the first turn). */
export function createMcpServers(config: ResolvedConfig, workspace: string, logger: Logger): McpServers {
  return new McpServers({ servers: enabledMcpServers(config), allowedHosts: config.tools.mcpAllowedHosts, workspace, logger });
}

function enabledMcpServers(config: ResolvedConfig) {
  return Object.fromEntries(Object.entries(config.tools.mcpServers).filter(([, server]) => server.enabled));
}

/** Applies a reloaded config's MCP servers to a running process's connections (see McpServers.reconfigure). */
export function reloadMcpServers(mcp: McpServers, config: ResolvedConfig, logger: Logger): void {
  mcp.reconfigure(enabledMcpServers(config), config.tools.mcpAllowedHosts).then(
    (changed) => {
      if (changed.added.length + changed.removed.length + changed.replaced.length > 0) logger.info(changed, "MCP servers reloaded");
    },
    (error: unknown) => logger.warn({ err: error }, "MCP servers could not be reloaded"),
  );
}

/** A tool registry's sources: the MCP servers offered to this audience. */
export function mcpSources(mcp: McpServers, audience: Parameters<McpServers["toolSource"]>[0]): ToolSource[] {
  return [mcp.toolSource(audience)];
}

/** The tools the main agent gets, as the config allows them: the built-in set plus its own, and every MCP server's. */
export function createTools(
  config: ResolvedConfig,
  dependencies: { memory: MemoryStore; people?: PersonMemory; bus?: MessageBus; jobs?: Jobs; metrics?: Metrics; mcp?: McpServers; allow?: readonly string[]; profile?: string; teams?: readonly string[] },
): ToolRegistry {
  const { bus, jobs, profile } = dependencies;
  const extra: Tool[] = [createMemoryTool(dependencies.memory, dependencies.people)];
  if (jobs) extra.push(createSpawnTool(jobs.subagents, profile), createCronTool(jobs.scheduler), createWorkflowRunTool({ catalog: jobs.teams, engine: jobs.workflows, profile, teams: dependencies.teams }));
  extra.push(
    createMessageTool({
      allowedTargets: config.tools.message.allowedTargets,
      sendTo: bus
        ? async (target, content) => {
            await bus.publishOutbound({ id: `tool-${crypto.randomUUID()}`, channel: target.channel, chatId: target.chatId, content, kind: "final", media: [], metadata: {} });
          }
        : undefined,
    }),
  );
  return createToolSet(config, { extra, metrics: dependencies.metrics, sources: dependencies.mcp ? mcpSources(dependencies.mcp, "agent") : [], allow: dependencies.allow });
}

/** The agent and what it needs: model, tools, store, memory, context. Throws ConfigError early. */
export async function createAgentRuntime(config: ResolvedConfig, logger: Logger, overrides: RuntimeOverrides = {}): Promise<AgentRuntime> {
  // A model handed in is used as it is (the worker's is counted already); one resolved here is counted.
  const model = overrides.model ?? instrumented(resolveChatModel(config, { logger }), overrides.metrics);
  await mkdir(config.workspace, { recursive: true });
  await mkdir(config.dataDir, { recursive: true });
  // `countbot agent` counts its calls in the ledger file a one-process deployment keeps.
  const ownLedger = overrides.budgets ? undefined : createMemoryBudgetLedger({ file: ledgerFile(config) });
  const budgets = overrides.budgets ?? createProcessBudgets(config, ownLedger!, logger, overrides.metrics);
  const workspace = await realpath(config.workspace);
  const store = overrides.store ?? createFileStore({ dataDir: config.dataDir, now: overrides.now });
  const memory = overrides.memory ?? createFileMemoryStore({ workspace, scope: config.memory.scope, now: overrides.now });
  const people = createPersonMemory(overrides.people ?? createFileMemoryStore({ workspace, scope: "person", now: overrides.now }), config.memory.identities);
  const mcp = overrides.mcp ?? createMcpServers(config, workspace, logger);
  const tools = createTools(config, { memory, people, bus: overrides.bus, jobs: overrides.jobs, metrics: overrides.metrics, mcp, allow: overrides.allowTools, profile: overrides.profile, teams: overrides.allowTeams });
  const sandbox = await checkExecSandbox(config, workspace, logger);
  const secrets = collectSecrets(config);
  const auditOptions: AuditLineOptions = { secrets, now: overrides.now, onError: (error) => logger.warn({ err: error }, "audit log write failed") };
  const audit = config.tools.audit.enabled
    ? (overrides.audit?.(auditOptions) ?? createFileAuditLog({ ...fileAuditOptions(config), ...auditOptions }))
    : undefined;
  const toolHistory = overrides.toolHistory?.(secrets) ?? createFileToolHistory({ directory: path.join(config.dataDir, "tool-history"), secrets, now: overrides.now });
  const context = new ContextBuilder({
    workspace,
    persona: config.agent.persona,
    memory,
    people,
    now: overrides.now,
    onSkillError: (error) => logger.warn(error, "a skill failed to load"),
  });
  const agent = new Agent({
    settings: config.agent,
    model,
    tools,
    store,
    memory,
    context,
    workspace,
    restrictToWorkspace: config.tools.restrictToWorkspace,
    logger,
    audit,
    toolHistory,
    budgets: guardForAgent(budgets.guard, overrides.profile ?? DEFAULT_PROFILE),
    now: overrides.now,
  });
  return {
    config,
    audit,
    agent,
    model,
    tools,
    store,
    workspace,
    sandbox,
    reload: (next) => {
      context.setPersona(next.agent.persona);
      reloadMcpServers(mcp, next, logger);
      try {
        budgets.reload(next);
      } catch (error) {
        logger.error({ err: error }, "the new budgets were not applied");
      }
    },
    close: async () => {
      await ownLedger?.close();
      if (!overrides.mcp) await mcp.close();
      await audit?.close();
      await toolHistory.close();
      if (!overrides.store) await store.close();
    },
  };
}

/** Logs what exec runs in (loudly when it runs unconfined or not at all) and says it in a few words. */
async function checkExecSandbox(config: ResolvedConfig, workspace: string, logger: Logger): Promise<string> {
  if (!config.tools.exec.enabled) return "exec off (tools.exec.enabled is false)";
  const sandbox = chooseSandbox(config.tools.exec.sandbox);
  if (sandbox.kind === "bwrap") {
    // Installed is not working: a container without user namespaces has bwrap but no sandbox.
    const probe = await probeBwrap(sandbox.bwrapPath, workspace);
    if (probe.ok) {
      logger.info({ bwrap: sandbox.bwrapPath }, "exec runs inside bubblewrap (uid 65534, own PID namespace, no network)");
      return "exec inside bubblewrap (no network, own PID namespace)";
    }
    logger.error({ reason: probe.message }, brokenSandboxMessage(probe.message));
    return "exec refused: bubblewrap cannot build its sandbox here (countbot doctor says why)";
  }
  if (sandbox.kind === "none") {
    logger.warn('EXEC WITHOUT A SANDBOX: tools.exec.sandbox is "none", so only the command pattern filter stands between the model and this machine (install bubblewrap and remove the setting)');
    return 'exec WITHOUT a sandbox (tools.exec.sandbox "none"): only the command filter guards this machine';
  }
  logger.error(sandbox.message);
  return "exec refused: no sandbox (install bubblewrap)";
}

/** The model, wrapped to trace its calls (a no-op while tracing is off) and to count them when there are metrics. */
export function instrumented(model: ChatModel, metrics: Metrics | undefined): ChatModel {
  const traced = traceModel(model);
  return metrics ? instrumentModel(traced, metrics) : traced;
}
