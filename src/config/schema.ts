/**
 * The configuration schema: the single source of the config types.
 * Every field carries a description; `config/countbot.schema.json` is generated from it.
 */
import { isIP } from "node:net";
import { z } from "zod";
import { webhookPathClashes, withAccounts } from "./accounts.js";
import { AgentProfilesSchema, RoutingSchema, routingIssues } from "./agents.js";
import { BudgetsSchema } from "./budgets.js";
import { PersonaSchema } from "./persona.js";
import { RedisSchema } from "./redis.js";
import { McpAllowedHostsSchema, McpServersSchema } from "./mcp.js";
import { TeamConfigEntrySchema, TeamNameSchema, teamNameKey } from "./team.js";
import { TranscriptionSchema } from "./transcription.js";

const positiveInt = z.number().int().positive();

/** The shortest `api.token` taken: 24 characters (the generated one has 32). */
export const MIN_API_TOKEN_LENGTH = 24;

function isAddressOrRange(text: string): boolean {
  const [address = "", prefix, ...rest] = text.split("/");
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128);
}

export { PersonaSchema, personalityPresets } from "./persona.js";
export { RedisSchema } from "./redis.js";

export const AgentSchema = z
  .strictObject({
    model: z
      .string()
      .regex(/^[\w.-]+\/.+$/, "expected `provider/model`, e.g. openai/gpt-4o-mini")
      .default("openai/gpt-4o-mini")
      .describe("`provider/model`; the provider is a key of `providers` or one of the built-in catalog (README, Providers: openai, anthropic, deepseek, qwen, ollama, ...)."),
    fallbackModels: z
      .array(z.string().regex(/^[\w.-]+\/.+$/, "expected `provider/model`"))
      .default([])
      .describe("Tried in order when the model fails with a retryable error after its retries, before any output."),
    maxIterations: positiveInt.max(500).default(25).describe("Model calls per turn; also caps the total tool calls."),
    maxRetries: z.number().int().min(1).max(10).default(3).describe("Attempts per tool call before its error goes to the model."),
    retryDelay: z.number().min(0).max(60).default(1).describe("Seconds between tool attempts."),
    temperature: z.number().min(0).max(2).default(0.7).describe("Sampling temperature."),
    maxTokens: positiveInt.default(4096).describe("Maximum output tokens per model call."),
    maxHistory: positiveInt.default(50).describe("Messages kept in context; older ones are summarized into memory."),
    archiveRetentionDays: z
      .number()
      .int()
      .min(0)
      .max(3_660)
      .default(90)
      .describe("Days the Redis store keeps a session's archived history (what compaction and /new moved out of the context) after its last addition; 0 keeps it for ever."),
    // 2,048: a turn in flight holds about 64 KiB (a full default history of 50 entries; measured by
    // `npm run bench -- turn-memory`), so the default lets a worker's turns take about 128 MiB.
    maxConcurrentTurns: positiveInt
      .max(10_000)
      .default(2_048)
      .describe(
        "Turns one worker runs at once (different chats). Past it the worker claims nothing more and messages wait in the bus. The default, 2048, comes from the memory a turn in flight holds, about 64 KiB with a full 50-entry history (2048 turns: about 128 MiB); lower it on a small machine or for long histories.",
      ),
    maxQueuedMessages: positiveInt
      .max(1_000_000)
      .default(10_000)
      .describe(
        "Without Redis: most messages the in-process bus holds at once (waiting for a turn or in one, and replies a platform has not taken yet). Past it a channel refuses new messages (the web answers 503, Telegram fetches the update again later) instead of the process's memory growing without bound. With Redis, messages wait in Redis and this is not used.",
      ),
    debounceMs: z.number().int().min(0).max(60_000).default(0).describe("Wait this long after a message for more before starting a turn."),
    providerRetries: z.number().int().min(0).max(10).default(3).describe("Retries of a model call on 429/5xx/timeouts (never after output began)."),
    requestTimeoutMs: positiveInt
      .default(120_000)
      .describe("Longest wait for a model's answer to start, and longest silence inside its stream (chunks without content, keep-alives, do not count as progress)."),
    requestDeadlineMs: positiveInt.default(600_000).describe("Longest one model request may take in all, however lively its stream; then the turn reports the failure."),
    showReasoning: z
      .boolean()
      .default(false)
      .describe(
        "Show the model's reasoning (DeepSeek's reasoning_content, Qwen's and Kimi's thinking, Anthropic's thinking blocks), dimmed, in the terminal chat and the web console. It is never part of the answer or the history either way; other platforms never show it.",
      ),
    persona: PersonaSchema.describe("The assistant's identity."),
  })
  .prefault({});

export const ProviderSchema = z.strictObject({
  type: z.enum(["openai", "anthropic"]).optional().describe("Wire protocol; defaults to anthropic for the provider named `anthropic`, openai otherwise."),
  apiKey: z.string().optional().describe("API key (secret). Use `${ENV_VAR}`."),
  baseURL: z.url().optional().describe("Base URL of the API, e.g. https://api.deepseek.com/v1 or http://localhost:11434/v1."),
  headers: z.record(z.string(), z.string()).optional().describe("Extra HTTP headers sent with every request."),
});

export const MemorySchema = z
  .strictObject({
    scope: z.enum(["chat", "global"]).default("chat").describe("`chat`: one MEMORY.md per chat; `global`: one shared by all chats. Person memory (facts a person tells about themselves) is kept apart, per person, either way."),
    identities: z
      .record(
        z.string().regex(/^[\w.-]{1,64}$/, "a name of 1-64 letters, digits, _ . - (no `:`)"),
        z.array(z.string().regex(/^[\w.-]+:[^\s:][^\s]*$/, "expected `channel:senderId`, e.g. telegram:123456")).min(1),
      )
      .default({})
      .superRefine((identities, context) => {
        const owner = new Map<string, string>();
        for (const [name, ids] of Object.entries(identities)) {
          for (const [index, id] of ids.entries()) {
            const earlier = owner.get(id);
            if (earlier !== undefined && earlier !== name) context.addIssue({ code: "custom", path: [name, index], message: `${id} is linked to "${earlier}" already: one account belongs to one person` });
            owner.set(id, name);
          }
        }
      })
      .describe(
        'One person\'s accounts on several platforms, linked under a name: `{ "alice": ["telegram:123", "discord:456"] }`. Their person memory is one, whichever account speaks. Unlinked accounts each have their own.',
      ),
  })
  .prefault({});

export const ToolsSchema = z
  .strictObject({
    restrictToWorkspace: z.boolean().default(true).describe("File tools refuse paths outside the workspace."),
    maxResultChars: positiveInt.default(16_000).describe("Tool results above this are saved to a file; the model gets the head."),
    maxReadBytes: positiveInt.default(1_000_000).describe("Largest file read_file returns."),
    braveApiKey: z.string().optional().describe("Brave Search API key (secret) for web search. Unset: no web search."),
    maxWriteBytes: positiveInt.default(1_000_000).describe("Largest content write_file and edit_file will write."),
    exec: z
      .strictObject({
        enabled: z.boolean().default(true).describe("Offer the exec (shell) tool."),
        timeoutSeconds: positiveInt.max(3_600).default(30).describe("A command is killed (its whole process group) after this long."),
        maxOutputChars: positiveInt.default(10_000).describe("Output beyond this keeps its head and tail."),
        denyPatterns: z.array(z.string()).default([]).describe("Extra regular expressions refused in any command segment, on top of the built-in ones (rm -r, mkfs, dd to devices, fork bombs, shutdown, ...)."),
        allowPatterns: z.array(z.string()).default([]).describe("When set, EVERY segment of a command must fully match one of these regular expressions."),
        sandbox: z.enum(["auto", "bwrap", "none"]).default("auto").describe("`auto` and `bwrap`: run every command inside bubblewrap (uid 65534, own PID namespace, no network); where no sandbox works, exec refuses every command. `none`: run without a sandbox, behind the pattern filter only (an explicit, unsafe opt-out)."),
      })
      .prefault({}),
    web: z
      .strictObject({
        enabled: z.boolean().default(true).describe("Offer web_fetch (and web_search when a Brave key is set)."),
        fetchMaxBytes: positiveInt.default(2_000_000).describe("Largest response body web_fetch reads."),
        fetchTimeoutMs: positiveInt.default(15_000).describe("Time limit of one web_fetch, redirects included."),
        maxRedirects: z.number().int().min(0).max(10).default(5).describe("Redirect hops web_fetch follows, each re-checked."),
        searchBaseURL: z.url().default("https://api.search.brave.com/res/v1").describe("Brave Search API base URL."),
        searchMaxResults: positiveInt.max(20).default(5).describe("Results web_search returns."),
      })
      .prefault({}),
    message: z
      .strictObject({
        allowedTargets: z.array(z.string()).default([]).describe("Session keys (`channel:chat_id`) the message tool may send to besides the current chat. Empty: only the current chat."),
      })
      .prefault({}),
    audit: z
      .strictObject({
        enabled: z.boolean().default(true).describe("Write every tool call to <dataDir>/audit/tool-calls.jsonl."),
        maxFileBytes: positiveInt.default(10_000_000).describe("Rotate the audit log at this size."),
        maxFiles: positiveInt.max(100).default(5).describe("Rotated audit files kept."),
      })
      .prefault({}),
    mcpServers: McpServersSchema.describe(
      "MCP servers by name, whose tools the agent gets as `mcp_<server>_<tool>`: a program started here (`command`, stdio) or an HTTP endpoint (`url`). Each worker connects on its first turn and keeps the connection.",
    ),
    mcpAllowedHosts: McpAllowedHostsSchema.describe(
      "Host names or IP addresses (as written in `url`) that HTTP MCP servers may be reached at although they are local or private, e.g. `127.0.0.1` for a server on this machine. Every other host must resolve to public addresses only.",
    ),
  })
  .prefault({});

/**
 * A channel's config section, as a channel plugin declares it. The config layer knows no platform:
 * the `channels` schema is assembled from these (see {@link defineConfigSchema}).
 */
export interface ChannelConfigSpec {
  /** Key under `channels`, e.g. `telegram`. */
  readonly name: string;
  readonly description: string;
  readonly configSchema: z.ZodType;
  /** Environment variables that set a field of the section: `{ TELEGRAM_BOT_TOKEN: "token" }`. */
  readonly environment?: Readonly<Record<string, string>>;
  /** The path of the HTTP callback a section (one account's) is served on, when it takes one: no two accounts may share one. */
  webhookPath?(section: never): string | undefined;
}

/**
 * `channels` with one optional section per plugin, each taking `accounts` (accounts.ts); any other
 * key is an error naming the field, and so is a webhook path two accounts share.
 */
function channelsSchema(channels: readonly ChannelConfigSpec[]) {
  const known = channels.map((channel) => channel.name);
  const shape = Object.fromEntries(channels.map((channel) => [channel.name, withAccounts(channel).optional().describe(channel.description)]));
  return z
    .object(shape)
    .catchall(
      z.unknown().superRefine((_value, context) => {
        context.addIssue({ code: "custom", message: `no channel plugin has this name (known: ${known.join(", ") || "none"}); see "Adding a platform" in the README` });
      }),
    )
    .superRefine((sections, context) => {
      for (const clash of webhookPathClashes(channels, sections)) context.addIssue({ code: "custom", ...clash });
    })
    .prefault({});
}

const clockTime = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, "expected HH:MM, 24-hour, e.g. 22:00");
const timeZone = z.string().refine(isTimeZone, "expected an IANA time zone, e.g. UTC or Europe/Berlin");

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

export const HeartbeatSchema = z
  .strictObject({
    enabled: z.boolean().default(false).describe("Every `intervalMinutes` the agent reads HEARTBEAT.md in the workspace and decides whether to write to the owner (`target`)."),
    intervalMinutes: positiveInt.max(1_440).default(30).describe("Minutes between heartbeats."),
    quietHours: z
      .strictObject({
        start: clockTime.describe("Start of the quiet hours (HH:MM), e.g. 22:00."),
        end: clockTime.describe("End of the quiet hours (HH:MM), e.g. 08:00; earlier than `start` means across midnight."),
        timezone: timeZone.default("UTC").describe("IANA time zone of `start` and `end`; also where the daily cap's day begins."),
      })
      .optional()
      .describe("No heartbeat in this daily window."),
    dailyCap: z.number().int().min(0).default(10).describe("Heartbeat messages the owner receives per day at most (replies of HEARTBEAT_OK do not count)."),
    target: z
      .string()
      .regex(/^[\w.-]+:.+$/, "expected a session key `channel:chat_id`, e.g. telegram:123456")
      .optional()
      .describe("Session key (`channel:chat_id`) of the owner's chat that heartbeats go to."),
  })
  .prefault({});

export const OpenAiEndpointSchema = z
  .strictObject({
    enabled: z.boolean().default(true).describe("Serve `/v1/chat/completions` and `/v1/models`: any OpenAI client talks to the agent (or, with the model `team:<name>`, runs a team)."),
    apiKeys: z
      .array(
        z
          .string()
          .trim()
          .refine((key) => key === "" || key.length >= 16, "at least 16 characters"),
      )
      .default([])
      // An empty one is an unset `${VAR}`: no key.
      .transform((keys) => keys.filter((key) => key !== ""))
      .describe("Bearer keys (secrets) the endpoint takes besides the API token, one per client: each key gets sessions of its own. Use `${ENV_VAR}`; an empty one is left out."),
    timeoutSeconds: z.number().int().min(1).max(86_400).default(900).describe("A request that has no answer after this long gets a 504 (the turn goes on and lands in the session's history)."),
  })
  .prefault({});

export const ApiSchema = z
  .strictObject({
    host: z.string().default("127.0.0.1").describe("Bind address of the HTTP API."),
    port: z.number().int().min(0).max(65_535).default(8787).describe("Port of the HTTP API."),
    token: z
      .string()
      .optional()
      .refine(
        (token) => token === undefined || token.trim() === "" || token.trim().length >= MIN_API_TOKEN_LENGTH,
        `at least ${MIN_API_TOKEN_LENGTH} characters: a shorter token can be guessed (set api.token or COUNTBOT_API_TOKEN to a long random value, or leave both unset and countbot generates one)`,
      )
      .describe(`Bearer token (secret), required when bound beyond loopback; at least ${MIN_API_TOKEN_LENGTH} characters. Unset: \`start\` and \`gateway\` generate one in <dataDir>/api-token.`),
    trustProxy: z
      .array(z.string().refine(isAddressOrRange, "expected an IP address or a CIDR range, e.g. 10.0.0.5 or 10.0.0.0/8"))
      .default([])
      .describe(
        "Addresses or CIDR ranges of the reverse proxies in front of the API. Only requests from them have `X-Forwarded-For` (the client's address, which the sign-in limit counts) and `X-Forwarded-Proto` (https makes the login cookie `Secure`) believed. Empty: neither header is believed.",
      ),
    allowedOrigins: z
      .array(z.url().transform((url) => new URL(url).origin))
      .default([])
      .describe("Browser origins (`https://console.example.com`) besides the API's own that may open its WebSocket and send it POST, PUT and DELETE requests. Others get 403."),
    openai: OpenAiEndpointSchema.describe("The OpenAI-compatible endpoint (`POST /v1/chat/completions`, `GET /v1/models`)."),
  })
  .prefault({});

export const MetricsSchema = z
  .strictObject({
    workerPort: z
      .number()
      .int()
      .min(0)
      .max(65_535)
      .optional()
      .describe("`countbot worker` serves `/metrics` (Prometheus, behind the API token, bound to api.host) on this port. Unset: workers serve none; the gateway always serves `/metrics` on the API."),
  })
  .prefault({});

export const LogSchema = z
  .strictObject({
    level: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info").describe("Least severe level written to the log."),
    format: z
      .enum(["auto", "json", "pretty"])
      .default("auto")
      .describe("`json`: one JSON object a line, for machines; `pretty`: for people; `auto`: pretty when stderr is a terminal, JSON otherwise."),
  })
  .prefault({});

const configShape = {
  $schema: z.string().optional().describe("Path or URL of the JSON Schema of this file, for editors."),
  agent: AgentSchema.describe("The agent loop and its model."),
  agents: AgentProfilesSchema.describe("Agent profiles by id, each with its own persona, models, tools, workspace and memory; `routing` picks one per message (see README, Several bots)."),
  routing: RoutingSchema,
  providers: z
    .record(z.string().regex(/^[\w.-]+$/, "expected a name of letters, digits, _ . -"), ProviderSchema)
    .default({})
    .describe("Model providers by name."),
  memory: MemorySchema.describe("Long-term memory."),
  tools: ToolsSchema.describe("Built-in tools."),
  channels: z.record(z.string(), z.unknown()).default({}).describe("Chat platforms, one section per channel plugin."),
  jobs: z
    .strictObject({
      lockDurationMs: z.number().int().min(1_000).max(600_000).default(30_000).describe("A running background job's lock; a worker that dies loses its jobs after at most this long."),
      stalledIntervalMs: z.number().int().min(500).max(600_000).default(30_000).describe("How often workers look for jobs whose worker died (each is re-run once, then failed with a reason)."),
      subagentsPerSession: z.number().int().min(1).max(100).default(3).describe("Unfinished subagents one chat may have at once."),
    })
    .prefault({})
    .describe("Background jobs (subagents, scheduled messages)."),
  workflows: z
    .strictObject({
      concurrency: z.number().int().min(1).max(1_000).default(16).describe("Team agents one worker runs at once (each agent of a run is a job on the `workflows` queue)."),
      globalConcurrency: z.number().int().min(1).max(100_000).optional().describe("Team agents the whole deployment runs at once, over all workers. Unset: only the per-worker limit."),
      perRunConcurrency: z.number().int().min(1).max(64).default(8).describe("Agents of one run that run at once, unless the team sets `maxParallel`."),
      perSession: z.number().int().min(1).max(100).default(3).describe("Unfinished team runs one chat may have at once."),
      allowedModelHosts: z
        .array(
          z
            .string()
            .min(1)
            .transform((host) => host.toLowerCase().replace(/^\[(.*)\]$/, "$1")),
        )
        .default([])
        .describe(
          "Host names a team's `modelConfig.baseURL` may point at while still using the provider's configured `apiKey` (and headers). Any other base URL than the provider's own needs the team's own `modelConfig.apiKey`: a provider's key goes only where the operator sent it.",
        ),
      keepRunsDays: z
        .number()
        .int()
        .min(0)
        .max(3_650)
        .default(30)
        .describe("Finished team runs (with every agent's output) are deleted this many days after they ended, checked hourly; 0 keeps them for ever. Unfinished runs are never deleted."),
    })
    .prefault({})
    .describe("Agent-team runs (see `teams`)."),
  teams: z
    .record(TeamNameSchema, TeamConfigEntrySchema)
    .superRefine((teams, context) => {
      const seen = new Map<string, string>();
      for (const name of Object.keys(teams)) {
        const earlier = seen.get(teamNameKey(name));
        if (earlier !== undefined) context.addIssue({ code: "custom", path: [name], message: `the same name as team "${earlier}": team names are compared without case` });
        seen.set(teamNameKey(name), name);
      }
    })
    .default({})
    .describe("Agent teams by name, started in any chat with `@name goal` or `/team name goal`; more can be created through the API."),
  budgets: BudgetsSchema.describe("Spend limits in tokens or money per person, chat, team run, channel and deployment, and model prices (see README, Budgets). Usage is counted whether or not a budget is set."),
  transcription: TranscriptionSchema.describe("Voice messages: the speech-to-text model they are transcribed with, and their size and duration caps (see README, Voice messages)."),
  heartbeat: HeartbeatSchema.describe("Periodic check-ins driven by HEARTBEAT.md (off by default)."),
  redis: RedisSchema.describe("Redis, for running several processes."),
  api: ApiSchema.describe("The HTTP API."),
  log: LogSchema.describe("Logging."),
  metrics: MetricsSchema.describe("Prometheus metrics."),
  shutdownGraceMs: z.number().int().min(0).max(600_000).default(20_000).describe("On SIGTERM, running turns get this long to finish before they are cut and handed to another worker."),
  dataDir: z.string().default("~/.countbot").describe("Sessions, audit log and other state. `~` and relative paths resolve against the home and working directories."),
  workspace: z.string().optional().describe("The agent's workspace (files, skills, memory). Default: `<dataDir>/workspace`. Relative paths resolve against the working directory."),
};

const configDescription = "CountBot configuration. String values may reference environment variables as `${VAR}`.";

/**
 * The configuration without channel sections' own schemas: the type every module below the
 * composition root sees (a channel reads its section through its plugin's schema).
 */
export const ConfigSchema = z.strictObject(configShape).superRefine(checkProfiles).describe(configDescription);

function checkProfiles(config: z.infer<z.ZodObject<typeof configShape>>, context: z.RefinementCtx): void {
  for (const issue of routingIssues(config)) context.addIssue({ code: "custom", ...issue });
}

/** The whole config file's schema: {@link ConfigSchema} with `channels` assembled from the plugins'. */
export function defineConfigSchema(channels: readonly ChannelConfigSpec[]) {
  return z
    .strictObject({ ...configShape, channels: channelsSchema(channels).describe("Chat platforms, one section per channel plugin.") })
    .superRefine(checkProfiles)
    .describe(configDescription);
}

export type Config = z.infer<typeof ConfigSchema>;
export type AgentConfig = Config["agent"];
export type ProviderConfig = z.infer<typeof ProviderSchema>;
export type PersonaConfig = AgentConfig["persona"];

/** Config after loading: paths resolved to absolute ones. */
export type ResolvedConfig = Config & { workspace: string; dataDir: string };
