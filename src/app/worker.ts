/**
 * The worker: agent turns from the bus and background jobs (`worker`, the agent half of `start`
 * and `chat`), with an agent per agent profile (profiles.ts), and the embedded runtime of one process.
 */
import { mkdir, realpath } from "node:fs/promises";
import type { Logger } from "pino";
import { TurnConsumer } from "../agent/turn-consumer.js";
import type { MessageBus } from "../bus/message-bus.js";
import { DEFAULT_PROFILE } from "../config/agents.js";
import type { ResolvedConfig } from "../config/schema.js";
import type { Jobs } from "../jobs/jobs.js";
import { createSubagentRunner } from "../jobs/subagents/runner.js";
import { createSubagentTools } from "../jobs/subagents/tools.js";
import { createTeamModels } from "../jobs/workflows/models.js";
import { createTeamAgentRunner } from "../jobs/workflows/runner.js";
import type { ChatModel } from "../providers/chat-model.js";
import { resolveChatModel } from "../providers/factory.js";
import type { McpServers } from "../tools/mcp/mcp-servers.js";
import { type AuditLog, auditEntryOf } from "../tools/audit-log.js";
import { type AgentRuntime, type RuntimeOverrides, createAgentRuntime, createMcpServers, instrumented, mcpSources } from "./agent.js";
import type { ProcessBudgets } from "./budgets.js";
import { createProcessBudgets } from "./budgets.js";
import { type Infrastructure, createInfrastructure } from "./infrastructure.js";
import { createJobsOn } from "./jobs.js";
import { createProfileAgents, profileConfig } from "./profiles.js";

export interface Worker extends AgentRuntime {
  bus: MessageBus;
  consumer: TurnConsumer;
  jobs: Jobs;
  /** Consume the bus and run jobs; resolves when the loop has stopped. */
  run(): Promise<void>;
}

/** What the job runners share with the worker that builds them. */
interface JobRunnerParts {
  model: ChatModel;
  /** Absolute, realpath'd workspace root. */
  workspace: string;
  budgets: ProcessBudgets;
  mcp: McpServers;
  /** The worker's audit log, known only once its runtime exists (after the runners). */
  auditRef: { log?: AuditLog };
  overrides: RuntimeOverrides;
}

/**
 * The loops a worker runs jobs with: a subagent's (on the subagents' tool subset) and a team
 * agent's (the same subset, on the team's models). Both count against the worker's budgets and
 * write their tool calls to the main agent's audit log.
 */
function createJobRunners(config: ResolvedConfig, logger: Logger, parts: JobRunnerParts) {
  const { model, workspace, budgets, mcp, auditRef, overrides } = parts;
  const runTask = createSubagentRunner({
    model,
    tools: createSubagentTools(config, { metrics: overrides.metrics, sources: mcpSources(mcp, "subagents") }),
    workspace,
    restrictToWorkspace: config.tools.restrictToWorkspace,
    maxRetries: config.agent.maxRetries,
    retryDelayMs: config.agent.retryDelay * 1000,
    temperature: config.agent.temperature,
    maxTokens: config.agent.maxTokens,
    budgets: budgets.guard,
    // Subagents' tool calls go to the same audit log as the main agent's (known once it exists below).
    listener: (task) => async (event) => {
      if (event.type === "tool-result") void auditRef.log?.record(auditEntryOf(event.record, { sessionKey: task.sessionKey, channel: "subagent", chatId: task.id }));
    },
  });
  // Team agents get the subagents' tool subset, and their own models (agent, team, then agent.model).
  const teamTools = createSubagentTools(config, { sources: mcpSources(mcp, "teams") });
  const runTeamAgent = createTeamAgentRunner({
    resolveModel: overrides.model ? () => overrides.model! : createTeamModels(config, { logger }),
    tools: teamTools,
    workspace,
    restrictToWorkspace: config.tools.restrictToWorkspace,
    maxRetries: config.agent.maxRetries,
    retryDelayMs: config.agent.retryDelay * 1000,
    defaults: { temperature: config.agent.temperature, maxTokens: config.agent.maxTokens },
    budgets: budgets.guard,
    listener: (run, node) => async (event) => {
      if (event.type === "tool-result") void auditRef.log?.record(auditEntryOf(event.record, { sessionKey: run.sessionKey, channel: "workflow", chatId: `${run.id}.${node.id}` }));
    },
  });
  return { runTask, runTeamAgent, teamTools };
}

/** Agent turns and background jobs from a bus: the worker process, and the agent half of `start` and `chat`. */
export async function createWorker(deployment: ResolvedConfig, logger: Logger, infrastructure: Infrastructure, overrides: RuntimeOverrides = {}): Promise<Worker> {
  // The default profile's agent is the worker's own, with jobs; the other profiles' come after it.
  const config = profileConfig(deployment, DEFAULT_PROFILE);
  const model = instrumented(overrides.model ?? resolveChatModel(config, { logger }), overrides.metrics);
  await mkdir(config.workspace, { recursive: true });
  const workspace = await realpath(config.workspace);
  const auditRef: { log?: AuditLog } = {};
  const budgets = overrides.budgets ?? createProcessBudgets(config, infrastructure.budgetLedger, logger, overrides.metrics);
  // One connection per MCP server for the whole worker: the agent's turns, subagents and team agents.
  const mcp = overrides.mcp ?? createMcpServers(config, workspace, logger);
  const { runTask, runTeamAgent, teamTools } = createJobRunners(config, logger, { model, workspace, budgets, mcp, auditRef, overrides });
  const jobs = createJobsOn(infrastructure, config, logger, { workspace, runTask, runTeamAgent, teamToolNames: () => teamTools.names(), now: overrides.now });
  const memory = infrastructure.memory({ workspace, scope: config.memory.scope });
  const runtime = await createAgentRuntime(config, logger, {
    ...overrides,
    model,
    store: infrastructure.store,
    memory,
    people: infrastructure.memory({ workspace, scope: "person" }),
    toolHistory: (secrets) => infrastructure.toolHistory({ secrets }),
    audit: (options) => infrastructure.auditLog(options),
    bus: infrastructure.bus,
    jobs,
    mcp,
    budgets,
    allowTools: deployment.agents[DEFAULT_PROFILE]?.tools,
  });
  auditRef.log = runtime.audit;
  const profiles = await createProfileAgents(deployment, logger, infrastructure, { main: runtime.agent, overrides: { ...overrides, budgets } });
  const consumer = new TurnConsumer({
    bus: infrastructure.bus,
    agent: runtime.agent,
    agentFor: (message) => profiles.agentFor(message),
    logger,
    concurrency: config.agent.maxConcurrentTurns,
    leaseTtlMs: infrastructure.leaseTtlMs,
    replyFilter: (messages, reply) => jobs.replyFilter(messages, reply),
    metrics: overrides.metrics,
    intercept: jobs.intercept,
    showReasoning: config.agent.showReasoning,
  });
  let jobsStarted: Promise<void> | undefined;
  let running: Promise<void> | undefined;
  return {
    ...runtime,
    bus: infrastructure.bus,
    consumer,
    jobs,
    reload(next) {
      runtime.reload(profileConfig(next, DEFAULT_PROFILE));
      profiles.reload(next);
    },
    run() {
      jobsStarted ??= jobs.start().catch((error: unknown) => logger.error({ err: error }, "background jobs failed to start"));
      running ??= consumer.run();
      return running;
    },
    close: async () => {
      await consumer.stop(5_000);
      await jobsStarted;
      await jobs.close();
      await profiles.close();
      await runtime.close();
      if (!overrides.mcp) await mcp.close();
    },
  };
}

export interface EmbeddedRuntime extends Worker {
  infrastructure: Infrastructure;
}

/** Everything in one process on the in-memory bus and the file store: `countbot chat`, tests. */
export async function createEmbeddedRuntime(config: ResolvedConfig, logger: Logger, overrides: RuntimeOverrides = {}): Promise<EmbeddedRuntime> {
  const infrastructure = await createInfrastructure(config, logger, { embedded: true, now: overrides.now });
  const worker = await createWorker(config, logger, infrastructure, overrides);
  return {
    ...worker,
    infrastructure,
    close: async () => {
      await worker.close();
      await infrastructure.close();
    },
  };
}

