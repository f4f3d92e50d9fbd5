/**
 * `countbot doctor`: what a deployment needs, checked one by one, each with what to do when it
 * fails. Nothing is started: each model the config and the team store use gets one tiny request
 * (./doctor-models.ts), Redis a few read-only commands, each
 * enabled channel one "who am I" call, each enabled MCP server a connection and its tool list.
 */
import { randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { access, mkdir, realpath, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "pino";
import type { ResolvedConfig } from "../config/schema.js";
import { type ConfigSource, describeConfigSource } from "../config/source.js";
import { errorMessage } from "../errors.js";
import type { ChannelPlugin } from "../gateway/channel.js";
import { type WithUnsetReferences, unsetReferences } from "../config/references.js";
import type { TeamRecord } from "../store/team-record.js";
import { type PlatformQuotas, describeScope } from "../gateway/quotas.js";
import { probeTranscriber, resolveTranscriber } from "../providers/transcription.js";
import { checkRedis } from "../redis/checks.js";
import { connectRedis, redactedRedisUrl, topologyOf, waitUntilReady } from "../redis/client.js";
import { brokenSandboxMessage, chooseSandbox, probeBwrap } from "../tools/exec-sandbox.js";
import { type WithdrawnSecrets, exposureUnderNoSandbox } from "./secret-environment.js";
import { createMcpServers } from "./agent.js";
import { askModel, declaredTeams, modelUses, readTeams } from "./doctor-models.js";
import { createChannels } from "./gateway-accounts.js";
import { checkWorkspaceMarkers, workspaceWarning } from "./workspace-markers.js";

export interface DoctorCheck {
  name: string;
  ok: boolean;
  /** What was found (ok), or what is wrong and how to fix it. */
  detail: string;
  /** A problem that does not stop CountBot (no bubblewrap, say): shown, not failed. */
  warning?: boolean;
}

export interface DoctorOptions {
  plugins: readonly ChannelPlugin[];
  /** What loading the config took out of the environment (for what a command without a sandbox can read). */
  withdrawn?: Pick<WithdrawnSecrets, "names" | "environBlock">;
  /** Where the config came from: named in the first line (none found is a warning, not a failure). */
  source?: ConfigSource;
  /** Each check's time limit. Default 10 s. */
  timeoutMs?: number;
}

export async function runDoctor(config: ResolvedConfig & WithUnsetReferences, logger: Logger, options: DoctorOptions): Promise<DoctorCheck[]> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const checks: DoctorCheck[] = [configCheck(options.source)];
  const run = async (name: string, check: () => Promise<string | { warning: string }>) => {
    try {
      const result = await withTimeout(check(), timeoutMs);
      checks.push(typeof result === "string" ? { name, ok: true, detail: result } : { name, ok: true, warning: true, detail: result.warning });
    } catch (error) {
      checks.push({ name, ok: false, detail: errorMessage(error).replace(/\s*\n\s*/g, "; ") });
    }
  };

  let teams: TeamRecord[];
  let teamsError: string | undefined;
  try {
    teams = await withTimeout(readTeams(config), timeoutMs);
  } catch (error) {
    teams = declaredTeams(config);
    teamsError = errorMessage(error);
  }
  for (const use of modelUses(config, teams, logger)) await run(`model ${use.reference} (${use.usedBy.join("; ")})`, () => askModel(use));
  if (teamsError) checks.push({ name: "teams", ok: false, detail: teamsError });
  const unset = unsetVariablesCheck(config);
  if (unset) checks.push(unset);
  const { transcription } = config;
  if (transcription.model) await run(`transcription ${transcription.model}`, () => probeTranscriber(resolveTranscriber(config, { env: process.env })!));
  if (config.redis.url) {
    await run("redis", () => checkRedisServer(config));
    await run("workspace shared", () => checkSharedWorkspace(config));
  }
  await run("data directory", () => checkDirectory(config.dataDir, "dataDir (COUNTBOT_DATA_DIR)"));
  await run("workspace", () => checkDirectory(config.workspace, "workspace (COUNTBOT_WORKSPACE)"));
  await run("exec sandbox", () => checkSandbox(config, options.withdrawn));
  for (const [name, server] of Object.entries(config.tools.mcpServers)) {
    if (server.enabled) await run(`mcp ${name}`, () => checkMcpServer(config, name, logger));
  }
  let channels: Awaited<ReturnType<typeof createChannels>> = [];
  try {
    channels = await createChannels(config, logger, { broadcast: async () => undefined, onBroadcast: async () => ({ close: async () => undefined }), watchDrafts: async () => ({ close: async () => undefined }) }, options.plugins);
  } catch (error) {
    checks.push({ name: "channels", ok: false, detail: errorMessage(error) });
  }
  for (const channel of channels) {
    const { adapter } = channel;
    if (adapter.probe) await run(`channel ${adapter.name}`, async () => `credentials accepted: ${await adapter.probe!()}`);
    if (channel.quotas) checks.push({ name: `limits ${adapter.name}`, ok: true, detail: describeLimits(channel.quotas) });
  }
  return checks;
}

/** The send budgets a channel keeps to (its platform's published limits, with `channels.<name>.limits` applied). */
function describeLimits(quotas: PlatformQuotas): string {
  return Object.entries(quotas.scopes)
    .map(([name, scope]) => describeScope(name, scope))
    .join("; ");
}

/** `✓ name: detail` lines, `!` for warnings and `✗` for failures. */
export function formatDoctor(checks: DoctorCheck[]): string {
  return checks.map((check) => `${check.ok ? (check.warning ? "!" : "✓") : "✗"} ${check.name}: ${check.detail}`).join("\n");
}

function configCheck(source: ConfigSource | undefined): DoctorCheck {
  if (source === undefined) return { name: "config", ok: true, detail: "valid" };
  if (source.file === undefined) return { name: "config", ok: true, warning: true, detail: describeConfigSource(source) };
  return { name: "config", ok: true, detail: `valid: ${describeConfigSource(source)}` };
}

/** The `${VAR}` references of the config that were not set: a warning, since each field may be optional. */
function unsetVariablesCheck(config: ResolvedConfig & WithUnsetReferences): DoctorCheck | undefined {
  const unset = config[unsetReferences] ?? [];
  if (unset.length === 0) return undefined;
  const listed = unset.map(({ variable, path }) => `\${${variable}} (${path})`).join(", ");
  return { name: "variables", ok: true, warning: true, detail: `not set, so these fields were left out: ${listed}` };
}

/** Connects to one MCP server the way a worker does (environment, address guard, timeouts) and lists its tools. */
async function checkMcpServer(config: ResolvedConfig, name: string, logger: Logger): Promise<string> {
  await mkdir(config.workspace, { recursive: true });
  const workspace = await realpath(config.workspace);
  const mcp = createMcpServers({ ...config, tools: { ...config.tools, mcpServers: { [name]: config.tools.mcpServers[name]! } } }, workspace, logger);
  try {
    await mcp.connectAll();
    const [status] = mcp.status();
    if (status?.state === "ready") {
      const server = status.server ? `${status.server.name} ${status.server.version}, ` : "";
      return `up (${server}${status.tools.length} tool${status.tools.length === 1 ? "" : "s"})`;
    }
    throw new Error(`${status?.state === "refused" ? "refused" : "did not come up"}: ${status?.error ?? "unknown reason"} (countbot mcp probe ${name} shows more)`);
  } finally {
    await mcp.close();
  }
}

async function checkRedisServer(config: ResolvedConfig): Promise<string> {
  const url = config.redis.url!;
  const redis = connectRedis(url, { name: "countbot-doctor", ...topologyOf(config.redis) });
  redis.on("error", () => undefined);
  try {
    await waitUntilReady(redis, config.redis.connectTimeoutMs).catch((error: unknown) => {
      throw new Error(`${redactedRedisUrl(url)} cannot be reached: ${errorMessage(error)}; check redis.url / REDIS_URL`);
    });
    const checked = await checkRedis(redis, { evictionPolicy: "refuse" });
    const appendonly = ((await redis.config("GET", "appendonly").catch(() => [])) as string[])[1];
    if (appendonly !== undefined && appendonly !== "yes") {
      throw new Error(`Redis ${checked.version} at ${redactedRedisUrl(url)} keeps no AOF (appendonly ${appendonly}): a Redis restart loses queued messages; run it with --appendonly yes`);
    }
    return `Redis ${checked.version}, maxmemory-policy ${checked.evictionPolicy ?? "unknown"}, appendonly ${appendonly ?? "unknown"}`;
  } finally {
    redis.disconnect();
  }
}

async function checkSharedWorkspace(config: ResolvedConfig): Promise<string> {
  const redis = connectRedis(config.redis.url!, { name: "countbot-doctor", ...topologyOf(config.redis) });
  redis.on("error", () => undefined);
  try {
    await waitUntilReady(redis, config.redis.connectTimeoutMs);
    const check = await checkWorkspaceMarkers(redis, config.redis.prefix, config.workspace);
    const warning = workspaceWarning(check, config.workspace);
    if (warning) throw new Error(warning);
    return check.checked === 0 ? "no worker has left a marker yet (each does at start)" : `sees the markers of all ${check.checked} worker(s)`;
  } finally {
    redis.disconnect();
  }
}

async function checkDirectory(directory: string, field: string): Promise<string | { warning: string }> {
  try {
    await mkdir(directory, { recursive: true });
    await access(directory, constants.W_OK);
    const probe = path.join(directory, `.countbot-doctor-${randomUUID()}`);
    await writeFile(probe, "ok");
    await rm(probe);
  } catch (error) {
    throw new Error(`${directory} is not writable (${(error as NodeJS.ErrnoException).code ?? errorMessage(error)}): fix its permissions or set ${field}`);
  }
  const info = await stat(directory);
  if ((info.mode & 0o002) !== 0) return { warning: `${directory} is writable by every user of this machine: chmod o-w it (it holds sessions and secrets)` };
  return `${await realpath(directory)} writable`;
}

async function checkSandbox(config: ResolvedConfig, withdrawn: DoctorOptions["withdrawn"]): Promise<string | { warning: string }> {
  if (!config.tools.exec.enabled) return "exec is off";
  const choice = chooseSandbox(config.tools.exec.sandbox);
  // No sandbox means exec refuses every command: a failure, unless the operator opted out of it.
  if (choice.kind === "unavailable") throw new Error(`${choice.message} (apt-get install bubblewrap)`);
  if (choice.kind === "none") {
    const exposure = exposureUnderNoSandbox(config, withdrawn ?? { names: [], environBlock: { scrubbed: false, reason: "not attempted" } });
    return { warning: `tools.exec.sandbox is "none": exec runs WITHOUT a sandbox, behind the command filter only. A command runs as this user: ${exposure.join("; ")}` };
  }
  await mkdir(config.workspace, { recursive: true });
  const probe = await probeBwrap(choice.bwrapPath, await realpath(config.workspace));
  if (probe.ok) return `bubblewrap at ${choice.bwrapPath} builds its sandbox (uid 65534, own PID namespace, no network)`;
  throw new Error(brokenSandboxMessage(probe.message));
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${Math.round(ms / 1000)} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
