/**
 * The gateway half of the composition root: every enabled channel from the plugin registry on the
 * shared channel runtime, and the HTTP API with the channels' routes and webhooks, pairing, tasks,
 * agent teams and their runs, sessions, operations, tool history, the OpenAI-compatible endpoint
 * (`/v1/`), and the web console at `/`.
 */
import { createPersonMemory } from "../memory/person-memory.js";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { channelPlugins } from "../../channels/index.js";
import { registerOperationRoutes } from "../api/operations-routes.js";
import { registerPairingRoutes } from "../api/pairing-routes.js";
import { type OpenAiEndpoint, createOpenAiEndpoint } from "../api/openai/endpoint.js";
import { type ApiServer, type Readiness, createApiServer } from "../api/server.js";
import { registerSessionRoutes } from "../api/session-routes.js";
import { registerTaskRoutes } from "../api/task-routes.js";
import { registerTeamRoutes } from "../api/team-routes.js";
import { teamEndpointIssue } from "../jobs/workflows/team-endpoint.js";
import { registerWorkflowRunRoutes } from "../api/workflow-run-routes.js";
import { registerUsageRoutes } from "../api/usage-routes.js";
import { describeUsage } from "../budget/usage-report.js";
import { registerToolHistoryRoutes } from "../api/tool-history-routes.js";
import { registerWebConsole } from "../api/web-console.js";
import type { BudgetsConfig } from "../config/budgets.js";
import type { ResolvedConfig } from "../config/schema.js";
import { accountsOf, splitChannel } from "../config/accounts.js";
import { routeProfile } from "../config/agents.js";
import { errorMessage } from "../errors.js";
import type { ChannelInstance, ChannelPlugin } from "../gateway/channel.js";
import { type ChannelRuntime, createChannelRuntime } from "../gateway/channel-runtime.js";
import { createVoiceIntake } from "../gateway/voice-intake.js";
import { resolveTranscriber } from "../providers/transcription.js";
import { channelHealthJson } from "../gateway/channel-health.js";
import type { ToolHistory } from "../tools/tool-history.js";
import type { SubagentManager } from "../jobs/subagents/manager.js";
import type { WorkflowEngine } from "../jobs/workflows/engine.js";
import type { TeamCatalog } from "../jobs/workflows/team-catalog.js";
import { type ApiToken, assertTokenFitsBinding } from "./api-token.js";
import type { Infrastructure } from "./infrastructure.js";
import { createAccount, createAccountSync, createChannels } from "./gateway-accounts.js";
import { type PrometheusMetrics, registerMetricsRoute } from "./metrics.js";
import { QUEUE_BOARD_PATH, type QueueBoard, createQueueBoard } from "./queue-board.js";
import type { JobCounts } from "../jobs/job-queue.js";
import { SUBAGENT_QUEUE } from "../jobs/subagents/manager.js";
import { WORKFLOW_QUEUE } from "../jobs/workflows/engine.js";

/**
 * Where `npm run build:web` (and `npm install`, through `prepare`) puts the console:
 * `<package>/web/dist`, the package being two levels up from the sources, three from their build in dist/.
 */
export const WEB_CONSOLE_DIRECTORY = path.join(packageRoot(), "web", "dist");

function packageRoot(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [path.resolve(here, "../.."), path.resolve(here, "../../..")];
  return candidates.find((candidate) => existsSync(path.join(candidate, "package.json"))) ?? candidates[0]!;
}

export interface Gateway {
  api: ApiServer;
  channels: ChannelRuntime[];
  /** `/v1/chat/completions` and `/v1/models`, unless `api.openai.enabled` is off. */
  openai?: OpenAiEndpoint;
  /** Applies the channels' new admission policies (a config reload). */
  reload(config: ResolvedConfig): void;
  start(): Promise<{ url: string; port: number }>;
  close(): Promise<void>;
}

export interface GatewayOptions {
  config: ResolvedConfig;
  logger: Logger;
  infrastructure: Pick<Infrastructure, "kind" | "bus" | "store" | "memory" | "elect" | "checks" | "bullmq" | "toolHistory" | "chatEvents" | "processes" | "budgetLedger"> &
    Partial<Pick<Infrastructure, "quotaStore">>;
  /** Extra readiness checks (the embedded worker's, say). */
  checks?: () => Promise<Readiness["checks"]>;
  /** Cancels subagent tasks wherever they run (the tasks API). */
  subagents: Pick<SubagentManager, "cancel">;
  /** Team runs: listed, shown and cancelled wherever their nodes run (the workflow-runs API), started by the OpenAI endpoint and the console. */
  workflows: Pick<WorkflowEngine, "start" | "get" | "list" | "cancel">;
  /** The config file's and the store's teams (the agent-teams API). */
  teams: TeamCatalog;
  /** Jobs waiting, running and failed per background queue (the operations API). */
  queueCounts?: () => Promise<Array<{ queue: string } & JobCounts>>;
  /** The built web console served at `/`. Default: the package's `web/dist`. */
  webConsoleDirectory?: string;
  /** The platforms to offer. Default: every plugin in `channels/index.ts`. */
  plugins?: readonly ChannelPlugin[];
  /** Served at `/metrics` (behind the token) and fed by the channels. */
  metrics?: PrometheusMetrics;
  /** The API's token (configured or generated: resolveApiToken). Default: `api.token` as configured. */
  apiToken?: ApiToken;
  /** Serves `POST /api/config/reload` (behind the token), answered with what the reload did. */
  onReloadRequest?: () => Promise<{ ok: boolean; error?: string; restartNeeded?: string[] }>;
  /** Where `transcription` reads its provider's `<PROVIDER>_API_KEY`. Default: the process's. */
  env?: NodeJS.ProcessEnv;
  now?: () => number;
}

export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  const { config, logger, infrastructure } = options;
  const { bus, store } = infrastructure;
  const readiness = () => readinessOf(options, channels);
  // Read-only here: workers write it (in Redis, or under this process's data directory when embedded).
  const toolHistory = infrastructure.toolHistory();
  const plugins = options.plugins ?? channelPlugins;
  const eventLogOf = (channel: string) => infrastructure.chatEvents(channel);
  const instances = await createChannels(config, logger, bus, plugins, options.now, eventLogOf);
  const { metrics } = options;
  // The BullMQ dashboard, over Redis; behind the token like the rest of the API.
  const board = infrastructure.bullmq && createQueueBoard({ ...infrastructure.bullmq, queues: [SUBAGENT_QUEUE, WORKFLOW_QUEUE] });
  const quotaStore = infrastructure.quotaStore?.bind(infrastructure);
  let budgets = config.budgets;
  let routing = config.routing;
  let accountsSynced = Promise.resolve();
  const usage = (scope: { person: string; chat: string }) => describeUsage(infrastructure.budgetLedger, budgets, scope, (options.now ?? Date.now)());
  const voice = createVoiceIntake({ transcriber: resolveTranscriber(config, { env: options.env ?? process.env }), maxBytes: config.transcription.maxBytes, maxSeconds: config.transcription.maxSeconds });
  // One person across the accounts `memory.identities` links (budgets, /usage, team runs).
  let linked = linkedAccounts(config.memory.identities);
  const linkedPerson = (speakerId: string) => linked.get(speakerId);
  const runtimeOf = (channel: ChannelInstance) => createChannelRuntime({ channel, bus, store, logger, elect: infrastructure.elect, metrics, quotaStore, usage, linkedPerson, voice, now: options.now });
  const channels = instances.map(runtimeOf);
  const accounts = createAccountSync({
    initial: config,
    plugins,
    logger,
    channels,
    build: async (planned) => runtimeOf(await createAccount(planned, { logger, dataDir: config.dataDir, bus, now: options.now, eventLogOf })),
  });
  metrics?.watch({ bus, leaders: () => channels.map((channel) => ({ name: channel.name, leading: channel.leading })), channels: () => channels.map((channel) => channel.health()) });
  const openai = config.api.openai.enabled
    ? createOpenAiEndpoint({ bus, teams: options.teams, workflows: options.workflows, config: config.api.openai, logger, now: options.now })
    : undefined;
  const api = createApiServer({
    bus,
    config: { ...config.api, token: options.apiToken?.token ?? config.api.token },
    logger,
    readiness,
    site: (app) => void registerWebConsole(app, { directory: options.webConsoleDirectory ?? WEB_CONSOLE_DIRECTORY, buildCommand: "npm run build:web", logger }),
    webhooks: instances.flatMap((channel) => (channel.webhook ? [accounts.guardWebhook(channel.adapter.name, channel.webhook)] : [])),
    families: openai ? [openai.family] : [],
    routes: [
      ...instances.flatMap((channel) => (channel.routes ? [channel.routes] : [])),
      ...(openai ? [openai.routes] : []),
      coreRoutes(options, { readiness, toolHistory, board, budgets: () => budgets, profileOf: (channel, chatId) => routeProfile(routing, { channel, chatId }) }),
    ],
  });
  return {
    api,
    channels,
    openai,
    reload(next) {
      budgets = next.budgets;
      routing = next.routing;
      linked = linkedAccounts(next.memory.identities);
      updatePolicies(channels, plugins, next);
      accountsSynced = accountsSynced.then(() => accounts.sync(next));
    },
    async start() {
      if (options.apiToken) assertTokenFitsBinding(config, options.apiToken);
      const address = await api.listen();
      try {
        // Side by side: a platform that is slow to answer holds up none of the others. One that
        // cannot connect is down and retried in the background (channel-runtime.ts).
        await Promise.all(channels.map((channel) => channel.start()));
        await openai?.start();
      } catch (error) {
        await openai?.stop();
        await api.close();
        throw new Error(`a channel failed to start: ${errorMessage(error)}`, { cause: error });
      }
      return address;
    },
    async close() {
      await accountsSynced;
      for (const channel of channels) await channel.stop();
      // Before the server: requests still waiting for the agent are answered (503), not held open.
      await openai?.stop();
      await api.close();
      await board?.close();
      await toolHistory.close();
    },
  };
}

/**
 * Ready while what is shared works and at least one channel serves (or stands by for another
 * gateway): one platform down does not take the process out of its load balancer.
 */
async function readinessOf(options: GatewayOptions, channels: readonly ChannelRuntime[]): Promise<Readiness> {
  const checks: Readiness["checks"] = { ...(await options.infrastructure.checks()), ...((await options.checks?.()) ?? {}) };
  const health = channels.map((channel) => channel.health());
  const serving = health.length === 0 || health.some((channel) => channel.state === "up" || channel.state === "degraded" || channel.state === "standby");
  return { ready: serving && Object.values(checks).every((check) => check.ok), checks, channels: health.map(channelHealthJson) };
}

/** A reload's new admission policy for each running channel (account) whose plugin has one, from its new section. */
function updatePolicies(channels: readonly ChannelRuntime[], plugins: readonly ChannelPlugin[], next: ResolvedConfig): void {
  for (const channel of channels) {
    const { platform, account: id } = splitChannel(channel.name);
    const plugin = plugins.find((candidate) => candidate.name === platform);
    const section = next.channels[platform];
    if (!plugin?.policy || typeof section !== "object" || section === null) continue;
    const account = accountsOf(platform, section as Record<string, unknown>).find((candidate) => candidate.id === id);
    const parsed = account && plugin.configSchema.safeParse(account.section);
    if (parsed?.success) channel.updatePolicy(plugin.policy(parsed.data));
  }
}

/** What the gateway's own routes use besides its options. */
interface CoreRouteParts {
  readiness: () => Promise<Readiness>;
  toolHistory: ToolHistory;
  board: QueueBoard | undefined;
  /** The current `budgets` section (a reload replaces it). */
  budgets: () => BudgetsConfig;
  /** The agent profile a chat is routed to, by the current `routing` (sender rules aside). */
  profileOf: (channel: string, chatId: string) => string;
}

/**
 * The API's own routes, behind the token: pairing, tasks, teams and their runs, tool history,
 * usage, sessions and their memory, operations, metrics, the queue board and the reload request.
 */
function coreRoutes(options: GatewayOptions, parts: CoreRouteParts): (scope: FastifyInstance) => void {
  const { config, infrastructure, metrics } = options;
  const { store, bus } = infrastructure;
  const { readiness, toolHistory, board, budgets } = parts;
  const memory = infrastructure.memory({ workspace: config.workspace, scope: config.memory.scope });
  const people = createPersonMemory(infrastructure.memory({ workspace: config.workspace, scope: "person" }), config.memory.identities);
  return (scope) => {
    registerPairingRoutes(scope, store);
    registerTaskRoutes(scope, { tasks: store.tasks, cancel: (id) => options.subagents.cancel(id) });
    registerTeamRoutes(scope, { teams: options.teams, now: options.now, endpointIssue: (team) => teamEndpointIssue(config, team) });
    registerWorkflowRunRoutes(scope, { workflows: options.workflows, teams: options.teams });
    registerToolHistoryRoutes(scope, toolHistory);
    registerUsageRoutes(scope, { ledger: infrastructure.budgetLedger, config: budgets, now: options.now });
    registerSessionRoutes(scope, { sessions: store.sessions, memory, people, profileOf: parts.profileOf });
    registerOperationRoutes(scope, {
      kind: infrastructure.kind,
      bus,
      readiness,
      tasks: store.tasks,
      queues: options.queueCounts,
      processes: () => infrastructure.processes(),
      links: { metrics: metrics ? "/metrics" : null, queues: board ? QUEUE_BOARD_PATH : null },
    });
    if (metrics) registerMetricsRoute(scope, metrics);
    board?.register(scope);
    const { onReloadRequest } = options;
    if (onReloadRequest) {
      scope.post("/api/config/reload", async (_request, reply) => {
        const outcome = await onReloadRequest();
        return reply.code(outcome.ok ? 200 : 422).send(outcome);
      });
    }
  };
}

/** `channel:senderId` → the name `memory.identities` links it under. */
function linkedAccounts(identities: Readonly<Record<string, readonly string[]>>): Map<string, string> {
  return new Map(Object.entries(identities).flatMap(([name, ids]) => ids.map((id) => [id, name] as const)));
}
