/**
 * The one place that builds CountBot's parts from the config and wires them together.
 * Nothing else constructs its own dependencies.
 */
import { mkdir, realpath } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "pino";
import { Agent } from "./agent/agent.js";
import { TurnConsumer } from "./agent/turn-consumer.js";
import { ContextBuilder } from "./agent/context-builder.js";
import { createMemoryStore } from "./agent/memory.js";
import { createMemoryBus } from "./bus/memory-bus.js";
import { createRedisBus } from "./bus/redis-bus.js";
import type { MessageBus } from "./bus/message-bus.js";
import { collectSecrets } from "./config/mask.js";
import type { ResolvedConfig } from "./config/schema.js";
import { ConfigError } from "./errors.js";
import { resolveChatModel } from "./providers/factory.js";
import type { ChatModel } from "./providers/chat-model.js";
import { checkRedis } from "./redis/checks.js";
import { connectRedis, type RedisConnection } from "./redis/client.js";
import { createFileStore } from "./store/file-store.js";
import { createRedisStore } from "./store/redis-store.js";
import type { Store } from "./store/store.js";
import { type AuditLog, auditEntryOf, createAuditLog } from "./tools/audit-log.js";
import { createEditFileTool } from "./tools/edit-file.js";
import { createExecTool } from "./tools/exec.js";
import { chooseSandbox } from "./tools/exec-sandbox.js";
import { createListDirTool } from "./tools/list-dir.js";
import { createMemoryTool } from "./tools/memory.js";
import { createMessageTool } from "./tools/message.js";
import { createReadFileTool } from "./tools/read-file.js";
import { ToolRegistry } from "./tools/registry.js";
import { createToolHistory } from "./tools/tool-history.js";
import { createCronTool } from "./tools/cron.js";
import { createSpawnTool } from "./tools/spawn.js";
import { type Jobs, createJobs } from "./jobs/jobs.js";
import { createSubagentRunner } from "./jobs/subagents/runner.js";
import { createSubagentTools } from "./jobs/subagents/tools.js";
import { createWriteFileTool } from "./tools/write-file.js";
import { createWebFetchTool } from "./tools/web-fetch.js";
import { createWebSearchTool } from "./tools/web-search.js";

/** The bus and the store: in memory and on disk for one process, or shared through Redis. */
export interface Infrastructure {
  bus: MessageBus;
  store: Store;
  /** The one connection: RedisClient for the gateway, BullmqConnection for the job queues. */
  redis?: RedisConnection;
  leaseTtlMs: number;
  close(): Promise<void>;
}

export interface InfrastructureOptions {
  /** `gateway` and `worker` only make sense with Redis: fail at start-up without it. */
  requireRedis?: string;
  /** Use the in-memory bus and file store even when Redis is configured (`countbot chat`). */
  embedded?: boolean;
  now?: () => number;
}

export async function createInfrastructure(config: ResolvedConfig, logger: Logger, options: InfrastructureOptions = {}): Promise<Infrastructure> {
  const leaseTtlMs = config.redis.leaseTtlMs;
  if (!config.redis.url || options.embedded) {
    if (options.requireRedis) {
      throw new ConfigError(`\`countbot ${options.requireRedis}\` needs Redis: set REDIS_URL or redis.url (or run \`countbot start\` for one process)`, "redis.url");
    }
    await mkdir(config.dataDir, { recursive: true });
    const bus = createMemoryBus({ debounceMs: config.agent.debounceMs, leaseTtlMs, now: options.now });
    const store = createFileStore({ dataDir: config.dataDir, now: options.now });
    return { bus, store, leaseTtlMs, close: async () => void (await Promise.all([bus.close(), store.close()])) };
  }
  const redis = connectRedis(config.redis.url, { name: "countbot" });
  try {
    const checked = await checkRedis(redis, { evictionPolicy: config.redis.evictionPolicy });
    for (const warning of checked.warnings) logger.warn(`REDIS WARNING: ${warning}`);
  } catch (error) {
    redis.disconnect();
    throw error;
  }
  const bus = createRedisBus({
    redis,
    prefix: config.redis.prefix,
    leaseTtlMs,
    debounceMs: config.agent.debounceMs,
    now: options.now,
    onError: (error) => logger.warn({ err: error }, "outbound delivery problem"),
  });
  const store = createRedisStore({ redis, prefix: config.redis.prefix, now: options.now });
  return {
    bus,
    store,
    redis,
    leaseTtlMs,
    close: async () => {
      await bus.close();
      await store.close();
      await redis.quit().catch(() => undefined);
    },
  };
}

export interface AgentRuntime {
  config: ResolvedConfig;
  /** Every tool call, when `tools.audit.enabled`. */
  audit?: AuditLog;
  agent: Agent;
  model: ChatModel;
  tools: ToolRegistry;
  store: Store;
  workspace: string;
  close(): Promise<void>;
}

export interface RuntimeOverrides {
  /** Use this model instead of the configured providers (tests, benchmarks). */
  model?: ChatModel;
  store?: Store;
  /** Lets the message tool reach chats other than the current one. */
  bus?: MessageBus;
  /** Subagents and scheduled messages: adds the spawn and cron tools. */
  jobs?: Jobs;
  now?: () => number;
}

/** The tools the main agent gets, as the config allows them. */
export function createTools(config: ResolvedConfig, dependencies: { memory: ReturnType<typeof createMemoryStore>; bus?: MessageBus; jobs?: Jobs }): ToolRegistry {
  const { tools } = config;
  const registry = new ToolRegistry({ maxResultChars: tools.maxResultChars })
    .register(createReadFileTool({ maxBytes: tools.maxReadBytes }))
    .register(createListDirTool())
    .register(createWriteFileTool({ maxBytes: tools.maxWriteBytes }))
    .register(createEditFileTool({ maxBytes: tools.maxWriteBytes }))
    .register(createMemoryTool(dependencies.memory));
  if (tools.exec.enabled) {
    registry.register(
      createExecTool({
        timeoutSeconds: tools.exec.timeoutSeconds,
        maxOutputChars: tools.exec.maxOutputChars,
        denyPatterns: tools.exec.denyPatterns,
        allowPatterns: tools.exec.allowPatterns,
        sandbox: tools.exec.sandbox,
      }),
    );
  }
  if (tools.web.enabled) {
    registry.register(createWebFetchTool({ maxBytes: tools.web.fetchMaxBytes, timeoutMs: tools.web.fetchTimeoutMs, maxRedirects: tools.web.maxRedirects }));
    const search = createWebSearchTool({ apiKey: tools.braveApiKey, baseURL: tools.web.searchBaseURL, maxResults: tools.web.searchMaxResults });
    if (search) registry.register(search);
  }
  if (dependencies.jobs) {
    registry.register(createSpawnTool(dependencies.jobs.subagents));
    registry.register(createCronTool(dependencies.jobs.scheduler));
  }
  const bus = dependencies.bus;
  registry.register(
    createMessageTool({
      allowedTargets: tools.message.allowedTargets,
      sendTo: bus
        ? async (target, content) => {
            await bus.publishOutbound({ id: `tool-${crypto.randomUUID()}`, channel: target.channel, chatId: target.chatId, content, kind: "final", media: [], metadata: {} });
          }
        : undefined,
    }),
  );
  return registry;
}

/** The agent and what it needs: model, tools, store, memory, context. Throws ConfigError early. */
export async function createAgentRuntime(config: ResolvedConfig, logger: Logger, overrides: RuntimeOverrides = {}): Promise<AgentRuntime> {
  const model = overrides.model ?? resolveChatModel(config, { logger });
  await mkdir(config.workspace, { recursive: true });
  await mkdir(config.dataDir, { recursive: true });
  const workspace = await realpath(config.workspace);
  const store = overrides.store ?? createFileStore({ dataDir: config.dataDir, now: overrides.now });
  const memory = createMemoryStore({ workspace, scope: config.memory.scope });
  const tools = createTools(config, { memory, bus: overrides.bus, jobs: overrides.jobs });
  if (config.tools.exec.enabled) {
    const sandbox = chooseSandbox(config.tools.exec.sandbox);
    if (sandbox.kind === "bwrap") logger.info({ bwrap: sandbox.bwrapPath }, "exec runs inside bubblewrap");
    else if (sandbox.kind === "none") logger.warn("exec runs WITHOUT a sandbox: only the command pattern filter stands between the model and this machine (install bubblewrap)");
    else logger.error(sandbox.message);
  }
  const secrets = collectSecrets(config);
  const audit = config.tools.audit.enabled
    ? createAuditLog({
        directory: path.join(config.dataDir, "audit"),
        maxFileBytes: config.tools.audit.maxFileBytes,
        maxFiles: config.tools.audit.maxFiles,
        secrets,
        now: overrides.now,
        onError: (error) => logger.warn({ err: error }, "audit log write failed"),
      })
    : undefined;
  const toolHistory = createToolHistory({ directory: path.join(config.dataDir, "tool-history"), secrets, now: overrides.now });
  const context = new ContextBuilder({
    workspace,
    persona: config.agent.persona,
    memory,
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
    close: async () => {
      await audit?.close();
      await toolHistory.close();
      if (!overrides.store) await store.close();
    },
  };
}

export interface Worker extends AgentRuntime {
  bus: MessageBus;
  loop: TurnConsumer;
  jobs: Jobs;
  /** Consume the bus and run jobs; resolves when the loop has stopped. */
  run(): Promise<void>;
}

/** Agent turns and background jobs from a bus: the worker process, and the agent half of `start` and `chat`. */
export async function createWorker(config: ResolvedConfig, logger: Logger, infrastructure: Infrastructure, overrides: RuntimeOverrides = {}): Promise<Worker> {
  const model = overrides.model ?? resolveChatModel(config, { logger });
  await mkdir(config.workspace, { recursive: true });
  const workspace = await realpath(config.workspace);
  const auditRef: { log?: AuditLog } = {};
  const runTask = createSubagentRunner({
    model,
    tools: createSubagentTools(config),
    workspace,
    restrictToWorkspace: config.tools.restrictToWorkspace,
    maxRetries: config.agent.maxRetries,
    retryDelayMs: config.agent.retryDelay * 1000,
    temperature: config.agent.temperature,
    maxTokens: config.agent.maxTokens,
    // Subagents' tool calls go to the same audit log as the main agent's (known once it exists below).
    listener: (task) => async (event) => {
      if (event.type === "tool-result") void auditRef.log?.record(auditEntryOf(event.record, { sessionKey: task.sessionKey, channel: "subagent", chatId: task.id }));
    },
  });
  const jobs = createJobs({ config, logger, bus: infrastructure.bus, store: infrastructure.store, redis: infrastructure.redis, workspace, runTask, now: overrides.now });
  const runtime = await createAgentRuntime(config, logger, { ...overrides, model, store: infrastructure.store, bus: infrastructure.bus, jobs });
  auditRef.log = runtime.audit;
  const loop = new TurnConsumer({
    bus: infrastructure.bus,
    agent: runtime.agent,
    logger,
    concurrency: config.agent.maxConcurrentTurns,
    leaseTtlMs: infrastructure.leaseTtlMs,
    replyFilter: (messages, reply) => jobs.replyFilter(messages, reply),
  });
  let jobsStarted: Promise<void> | undefined;
  let running: Promise<void> | undefined;
  return {
    ...runtime,
    bus: infrastructure.bus,
    loop,
    jobs,
    run() {
      jobsStarted ??= jobs.start().catch((error: unknown) => logger.error({ err: error }, "background jobs failed to start"));
      running ??= loop.run();
      return running;
    },
    close: async () => {
      await loop.stop(5_000);
      await jobsStarted;
      await jobs.close();
      await runtime.close();
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
