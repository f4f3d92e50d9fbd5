/**
 * `countbot status`: the deployment at a glance, first naming the config file it read.
 *
 * - Over Redis: the gateways and workers alive (each says so every few seconds) with each gateway's
 *   channels and their health, the chats waiting and being answered, dead letters, subagent tasks.
 * - Without Redis everything runs in one `countbot start`, whose bus lives in its memory: status
 *   asks that process's API (`GET /api/operations`, with its token) for the same figures, and says
 *   where it looked when nothing answers.
 *
 * Exit 1 when messages cannot flow: nothing receives them, or nothing answers them.
 */
import { z } from "zod";
import { type ProcessRecord, createInfrastructure } from "../app/infrastructure.js";
import type { ResolvedConfig } from "../config/schema.js";
import { describeConfigSource } from "../config/source.js";
import { type ProcessApiOptions, ProcessApiUnreachable, callProcessApi } from "./process-api.js";
import { type CliContext, loadCliConfig } from "./setup.js";
import { accountLines, profileLines } from "./status-profiles.js";

export interface StatusCommandOptions extends CliContext, ProcessApiOptions {}

export async function runStatusCommand(options: StatusCommandOptions = {}): Promise<number> {
  const { config, logger, source } = loadCliConfig(options);
  const lines = [`config: ${describeConfigSource(source)}`, ...accountLines(config), ...profileLines(config)];
  if (!config.redis.url) return statusInProcess(config, lines, options);
  const infrastructure = await createInfrastructure(config, logger, { requireRedis: "status" });
  try {
    const [processes, bus, tasks] = await Promise.all([infrastructure.processes(), infrastructure.bus.stats(), infrastructure.store.tasks.stats()]);
    const now = Date.now();
    lines.push(`processes (${processes.length}):`, ...processes.flatMap((record) => [`  ${describe(record, now)}`, ...channelLines(record, now)]));
    if (processes.length === 0) lines.push("  none alive: is `countbot gateway` or `countbot worker` running against this Redis (redis.url, redis.prefix)?");
    lines.push(`chats: ${bus.ready} waiting for a worker, ${bus.leased} being answered`);
    lines.push(`dead letters: ${bus.deadLetters}`);
    lines.push(`subagent tasks: ${tasks.running} running, ${tasks.pending} pending, ${tasks.failed} failed, ${tasks.completed} completed`);
    process.stdout.write(`${lines.join("\n")}\n`);
    const gateways = processes.filter((record) => record.role === "gateway" || record.role === "start").length;
    const workers = processes.filter((record) => record.role === "worker" || record.role === "start").length;
    return gateways > 0 && workers > 0 ? 0 : 1;
  } finally {
    await infrastructure.close();
  }
}

/** The bits of `GET /api/operations` status prints; anything else in it is ignored. */
const OperationsSchema = z.object({
  ready: z.boolean(),
  checks: z.record(z.string(), z.object({ ok: z.boolean(), detail: z.string().optional() })),
  sessions: z.object({ waiting: z.number(), answering: z.number(), deadLetters: z.number() }),
  tasks: z.object({ running: z.number(), pending: z.number(), failed: z.number(), completed: z.number() }),
});

async function statusInProcess(config: ResolvedConfig, lines: string[], options: ProcessApiOptions): Promise<number> {
  lines.push("bus: in-process (no Redis configured: redis.url and REDIS_URL are unset), so asking the API of a running `countbot start`");
  const print = () => process.stdout.write(`${lines.join("\n")}\n`);
  let answer: Awaited<ReturnType<typeof callProcessApi>>;
  try {
    answer = await callProcessApi(config, { method: "GET", path: "/api/operations" }, options);
  } catch (error) {
    if (!(error instanceof ProcessApiUnreachable)) throw error;
    lines.push(error.message);
    print();
    return 1;
  }
  const operations = OperationsSchema.safeParse(answer.body);
  if (answer.status === 401 || answer.status === 403) {
    lines.push(`the API at ${answer.url} refused the token (${answer.status}): set api.token or COUNTBOT_API_TOKEN to the running process's token, or use the same dataDir`);
  } else if (!operations.success) {
    lines.push(`the API at ${answer.url} answered ${answer.status} without the operations overview: is that a countbot process?`);
  } else {
    const { ready, checks, sessions, tasks } = operations.data;
    const failing = Object.entries(checks).filter(([, check]) => !check.ok);
    lines.push(`countbot start at ${new URL(answer.url).origin}: ${ready ? "ready" : `not ready (${failing.map(([name, check]) => `${name}: ${check.detail ?? "failing"}`).join("; ")})`}`);
    lines.push(`chats: ${sessions.waiting} waiting for a worker, ${sessions.answering} being answered`);
    lines.push(`dead letters: ${sessions.deadLetters}`);
    lines.push(`subagent tasks: ${tasks.running} running, ${tasks.pending} pending, ${tasks.failed} failed, ${tasks.completed} completed`);
    print();
    return ready ? 0 : 1;
  }
  print();
  return 1;
}

function describe(record: ProcessRecord, now: number): string {
  return `${record.role.padEnd(8)} ${record.host}:${record.pid}  up ${duration(now - record.startedAt)}  seen ${duration(now - record.seenAt)} ago`;
}

/** `    telegram  up since 2m, 12 in / 30 out` and, while down, why and when it tries again. */
function channelLines(record: ProcessRecord, now: number): string[] {
  return (record.channels ?? []).map((channel) => {
    const since = `${channel.state} for ${duration(now - Date.parse(channel.since))}`;
    const traffic = `${channel.messagesIn} in / ${channel.messagesOut} out`;
    const why = channel.state === "down" || channel.state === "degraded" ? `: ${channel.lastError?.message ?? "unknown"}${channel.retryAt ? ` (next try in ${duration(Date.parse(channel.retryAt) - now)})` : ""}` : "";
    return `    ${channel.name.padEnd(9)} ${since}, ${traffic}${why}`;
  });
}

function duration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 90) return `${seconds}s`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) return `${minutes}m`;
  return `${Math.round(minutes / 60)}h`;
}
