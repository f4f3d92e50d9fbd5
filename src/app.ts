/**
 * The one place that builds CountBot's parts from the config and wires them together.
 * Nothing else constructs its own dependencies.
 */
import { mkdir, realpath } from "node:fs/promises";
import type { Logger } from "pino";
import { Agent } from "./agent/agent.js";
import { AgentLoop } from "./agent/agent-loop.js";
import { ContextBuilder } from "./agent/context-builder.js";
import { createMemoryStore } from "./agent/memory.js";
import { createMemoryBus } from "./bus/memory-bus.js";
import type { MessageBus } from "./bus/types.js";
import type { ResolvedConfig } from "./config/schema.js";
import { resolveChatModel } from "./providers/factory.js";
import type { ChatModel } from "./providers/types.js";
import { createFileStore } from "./store/file-store.js";
import type { Store } from "./store/types.js";
import { createListDirTool } from "./tools/list-dir.js";
import { createMemoryTool } from "./tools/memory.js";
import { createReadFileTool } from "./tools/read-file.js";
import { ToolRegistry } from "./tools/registry.js";

export interface AgentRuntime {
  config: ResolvedConfig;
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
  now?: () => number;
}

/** The agent and what it needs: model, tools, store, memory, context. Throws ConfigError early. */
export async function createAgentRuntime(config: ResolvedConfig, logger: Logger, overrides: RuntimeOverrides = {}): Promise<AgentRuntime> {
  const model = overrides.model ?? resolveChatModel(config, { logger });
  await mkdir(config.workspace, { recursive: true });
  await mkdir(config.dataDir, { recursive: true });
  const workspace = await realpath(config.workspace);
  const store = overrides.store ?? createFileStore({ dataDir: config.dataDir, now: overrides.now });
  const memory = createMemoryStore({ workspace, scope: config.memory.scope });
  const tools = new ToolRegistry({ maxResultChars: config.tools.maxResultChars })
    .register(createReadFileTool({ maxBytes: config.tools.maxReadBytes }))
    .register(createListDirTool())
    .register(createMemoryTool(memory));
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
    now: overrides.now,
  });
  return { config, agent, model, tools, store, workspace, close: () => store.close() };
}

export interface EmbeddedRuntime extends AgentRuntime {
  bus: MessageBus;
  loop: AgentLoop;
}

/** Everything in one process on the in-memory bus: what `countbot chat` and `start` run. */
export async function createEmbeddedRuntime(config: ResolvedConfig, logger: Logger, overrides: RuntimeOverrides = {}): Promise<EmbeddedRuntime> {
  const runtime = await createAgentRuntime(config, logger, overrides);
  const leaseTtlMs = 30_000;
  const bus = createMemoryBus({ debounceMs: config.agent.debounceMs, leaseTtlMs, now: overrides.now });
  const loop = new AgentLoop({ bus, agent: runtime.agent, logger, concurrency: config.agent.maxConcurrentTurns, leaseTtlMs });
  return {
    ...runtime,
    bus,
    loop,
    close: async () => {
      await loop.stop(5_000);
      await bus.close();
      await runtime.close();
    },
  };
}
