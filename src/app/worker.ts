/**
 * The worker: agent turns from the bus and background jobs (`worker`, the agent half of `start`
 * and `chat`), with an agent per agent profile (profiles.ts), and the embedded runtime of one process.
 */
import { mkdir, realpath } from "node:fs/promises";
import type { Logger } from "pino";
import { TurnConsumer } from "../agent/turn-consumer.js";
import type { MessageBus } from "../bus/message-bus.js";
import { DEFAULT_PROFILE, routeProfile } from "../config/agents.js";
import type { ResolvedConfig } from "../config/schema.js";
import type { Jobs } from "../jobs/jobs.js";
import { resolveChatModel } from "../providers/factory.js";
import type { AuditLog } from "../tools/audit-log.js";
import { type AgentRuntime, type RuntimeOverrides, createAgentRuntime, createMcpServers, instrumented } from "./agent.js";
import { createProcessBudgets } from "./budgets.js";
import { type Infrastructure, createInfrastructure } from "./infrastructure.js";
import { createJobsOn } from "./jobs.js";
import { type JobRunners, createJobRunners } from "./job-runners.js";
import { type ProfileAgents, createProfileAgents, profileConfig, routedMessageOf } from "./profiles.js";

export interface Worker extends AgentRuntime {
  bus: MessageBus;
  consumer: TurnConsumer;
  jobs: Jobs;
  /** Consume the bus and run jobs; resolves when the loop has stopped. */
  run(): Promise<void>;
}

/** Agent turns and background jobs from a bus: the worker process, and the agent half of `start` and `chat`. */
export async function createWorker(deployment: ResolvedConfig, logger: Logger, infrastructure: Infrastructure, overrides: RuntimeOverrides = {}): Promise<Worker> {
  // The default profile's agent is the worker's own, with jobs; the other profiles' come after it.
  const config = profileConfig(deployment, DEFAULT_PROFILE);
  let current = deployment;
  const model = instrumented(overrides.model ?? resolveChatModel(config, { logger }), overrides.metrics);
  await mkdir(config.workspace, { recursive: true });
  const workspace = await realpath(config.workspace);
  const auditRef: { log?: AuditLog } = {};
  const budgets = overrides.budgets ?? createProcessBudgets(config, infrastructure.budgetLedger, logger, overrides.metrics);
  // One connection per MCP server for the whole worker: the agent's turns, subagents and team agents.
  const mcp = overrides.mcp ?? createMcpServers(config, workspace, logger);
  const defaultRunners = createJobRunners(config, logger, { model, workspace, budgets, mcp, auditRef, overrides });
  // A job runs as the profile that started it (the profiles' runners exist once their agents do).
  const late: { profiles?: ProfileAgents } = {};
  const runnersOf = runnersFinder(defaultRunners, late);
  const jobs = createJobsOn(infrastructure, config, logger, {
    workspace,
    runTask: (task, signal, onProgress) => runnersOf(task.profile).runTask(task, signal, onProgress),
    runTeamAgent: (request) => runnersOf(request.run.profile).runTeamAgent(request),
    teamToolNames: () => runnersOf().teamTools.names(),
    profileOf: (message) => routeProfile(current.routing, routedMessageOf(message)),
    teamsOf: (message) => current.agents[routeProfile(current.routing, routedMessageOf(message))]?.teams,
    now: overrides.now,
  });
  const runtime = await createAgentRuntime(config, logger, {
    ...overrides,
    model,
    store: infrastructure.store,
    memory: infrastructure.memory({ workspace, scope: config.memory.scope }),
    people: infrastructure.memory({ workspace, scope: "person" }),
    toolHistory: (secrets) => infrastructure.toolHistory({ secrets }),
    audit: (options) => infrastructure.auditLog(options),
    bus: infrastructure.bus,
    jobs,
    mcp,
    budgets,
    allowTools: deployment.agents[DEFAULT_PROFILE]?.tools,
    allowTeams: deployment.agents[DEFAULT_PROFILE]?.teams,
  });
  auditRef.log = runtime.audit;
  const agents = (late.profiles = await createProfileAgents(deployment, logger, infrastructure, { main: runtime.agent, jobs, overrides: { ...overrides, budgets } }).catch(async (error: unknown) => {
    await Promise.allSettled([jobs.close(), runtime.close(), overrides.mcp ? undefined : mcp.close()]);
    throw error;
  }));
  const consumer = new TurnConsumer({
    bus: infrastructure.bus,
    agent: runtime.agent,
    agentFor: (message) => agents.agentFor(message),
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
      agents.reload(next).catch((error: unknown) => logger.error({ err: error }, "agent profiles could not be reloaded"));
      current = next;
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
      await agents.close();
      await runtime.close();
      if (!overrides.mcp) await mcp.close();
    },
  };
}

/** The job runners of a job's profile: the default one's, or another's while it is configured. */
function runnersFinder(defaultRunners: JobRunners, late: { profiles?: ProfileAgents }): (profile?: string) => JobRunners {
  return (profile = DEFAULT_PROFILE) => {
    const found = profile === DEFAULT_PROFILE ? defaultRunners : late.profiles?.runnersOf(profile);
    if (!found) throw new Error(`it runs as agent profile "${profile}", which this worker's config does not have`);
    return found;
  };
}

export interface EmbeddedRuntime extends Worker {
  infrastructure: Infrastructure;
}

/** Everything in one process on the in-memory bus and the file store: `countbot chat`, tests. */
export async function createEmbeddedRuntime(config: ResolvedConfig, logger: Logger, overrides: RuntimeOverrides = {}): Promise<EmbeddedRuntime> {
  const infrastructure = await createInfrastructure(config, logger, { embedded: true, now: overrides.now });
  const worker = await createWorker(config, logger, infrastructure, overrides).catch(async (error: unknown) => {
    await infrastructure.close();
    throw error;
  });
  return {
    ...worker,
    infrastructure,
    close: async () => {
      await worker.close();
      await infrastructure.close();
    },
  };
}

