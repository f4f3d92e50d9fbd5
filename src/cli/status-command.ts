/**
 * `countbot status`: the deployment at a glance, over Redis: the gateways and workers alive (each
 * says so every few seconds) with each gateway's channels and their health, the chats waiting and
 * being answered, dead letters, subagent tasks.
 */
import { type ProcessRecord, createInfrastructure } from "../app/infrastructure.js";
import { loadCliConfig } from "./setup.js";

export async function runStatusCommand(): Promise<number> {
  const { config, logger } = loadCliConfig();
  if (!config.redis.url) {
    process.stdout.write("no Redis configured: `countbot start` runs everything in one process; ask it with GET /ready and GET /metrics\n");
    return 0;
  }
  const infrastructure = await createInfrastructure(config, logger, { requireRedis: "status" });
  try {
    const [processes, bus, tasks] = await Promise.all([infrastructure.processes(), infrastructure.bus.stats(), infrastructure.store.tasks.stats()]);
    const now = Date.now();
    const lines = [`processes (${processes.length}):`, ...processes.flatMap((record) => [`  ${describe(record, now)}`, ...channelLines(record, now)])];
    if (processes.length === 0) lines.push("  none alive: is `countbot gateway` or `countbot worker` running against this Redis (redis.url, redis.prefix)?");
    lines.push(`chats: ${bus.ready} waiting for a worker, ${bus.leased} being answered`);
    lines.push(`dead letters: ${bus.deadLetters}`);
    lines.push(`subagent tasks: ${tasks.running} running, ${tasks.pending} pending, ${tasks.failed} failed, ${tasks.completed} completed`);
    process.stdout.write(`${lines.join("\n")}\n`);
    const gateways = processes.filter((record) => record.role === "gateway" || record.role === "start").length;
    const workers = processes.filter((record) => record.role === "worker" || record.role === "start").length;
    // Exit 1 when messages cannot flow: nothing receives them, or nothing answers them.
    return gateways > 0 && workers > 0 ? 0 : 1;
  } finally {
    await infrastructure.close();
  }
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
