/**
 * A redis-server of the bench's own (so its CPU and its command counts are this run's alone, not
 * those of whatever else uses the shared Redis), and two ways to see what CountBot asks of it:
 *
 * - `commandCounter`: MONITOR, which names the source of every command: a client's address, or
 *   `lua` for a command a script ran. Client addresses are matched to connection names (CLIENT
 *   LIST; CountBot names its connections `countbot-<role>`), so the count says who sent what.
 *   MONITOR costs Redis CPU: count in a run of its own, not in one whose CPU is measured.
 * - `executedCommands`: INFO commandstats deltas, every command Redis executed, script calls and
 *   what the scripts ran inside them alike (the figure Redis's own load follows).
 */
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { loadScript } from "../src/redis/scripts.js";
import { type OwnRedis, startRedisServer } from "../tests/support/redis-server.js";

export interface BenchRedis {
  url: string;
  /** The server's pid, for its CPU time. */
  pid: number;
  stop(): Promise<void>;
}

/** A redis-server on a free loopback port, no persistence: the bench's own. */
export async function startBenchRedis(): Promise<BenchRedis> {
  const own: OwnRedis = await startRedisServer(["--appendonly", "no", "--maxmemory-policy", "noeviction"]);
  const probe = new Redis(own.url);
  const info = await probe.info("server");
  await probe.quit();
  const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
  if (!Number.isInteger(pid)) throw new Error(`redis-server at ${own.url} did not report its pid`);
  return { url: own.url, pid, stop: () => own.stop() };
}

export interface CommandCount {
  /** Commands clients sent, by connection name (`countbot-gateway`, ...), then by command. */
  sent: Record<string, Record<string, number>>;
  /** Commands scripts ran inside Redis, by command. */
  inScripts: Record<string, number>;
}

export interface CommandCounter {
  /** Counts from now on (what came before is dropped). */
  reset(): void;
  /** What was counted since the last reset. */
  read(): Promise<CommandCount>;
  close(): Promise<void>;
}

/** Counts every command Redis receives, through MONITOR. */
export async function commandCounter(url: string): Promise<CommandCounter> {
  const admin = new Redis(url, { connectionName: "bench-meter" });
  const monitorConnection = new Redis(url, { connectionName: "bench-monitor" });
  const monitor = await monitorConnection.monitor();
  const names = new Map<string, string>();
  let sentByAddress = new Map<string, Map<string, number>>();
  let inScripts = new Map<string, number>();
  monitor.on("monitor", (_time: string, args: string[], source: string) => {
    const command = (args[0] ?? "").toLowerCase();
    if (source === "lua") {
      inScripts.set(command, (inScripts.get(command) ?? 0) + 1);
      return;
    }
    let commands = sentByAddress.get(source);
    if (!commands) sentByAddress.set(source, (commands = new Map()));
    commands.set(command, (commands.get(command) ?? 0) + 1);
  });

  const refreshNames = async () => {
    const list = String(await admin.client("LIST"));
    for (const line of list.split("\n")) {
      const address = /(?:^| )addr=(\S+)/.exec(line)?.[1];
      const name = /(?:^| )name=(\S*)/.exec(line)?.[1];
      if (address) names.set(address, name || "(unnamed)");
    }
  };
  // Connections come and go (a worker's blocking reads, BullMQ's): learn their names as they appear.
  const namer = setInterval(() => void refreshNames().catch(() => undefined), 250);
  await refreshNames();

  return {
    reset() {
      sentByAddress = new Map();
      inScripts = new Map();
    },
    async read() {
      await refreshNames();
      const sent: Record<string, Record<string, number>> = {};
      for (const [address, commands] of sentByAddress) {
        const name = names.get(address) ?? "(gone before it was named)";
        if (name.startsWith("bench-")) continue;
        const counts = (sent[name] ??= {});
        for (const [command, count] of commands) counts[command] = (counts[command] ?? 0) + count;
      }
      return { sent, inScripts: Object.fromEntries(inScripts) };
    },
    async close() {
      clearInterval(namer);
      // monitor() opened a connection of its own, in monitor mode.
      monitor.disconnect();
      monitorConnection.disconnect();
      await admin.quit().catch(() => undefined);
    },
  };
}

/** Every command Redis executed so far (script calls and the commands inside them), from INFO commandstats. */
export async function executedCommands(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info("commandstats");
  const counts: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}

/** The microseconds Redis spent executing each command so far (INFO commandstats `usec`; a script call's includes the commands it ran). */
export async function executedMicros(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info("commandstats");
  const micros: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=\d+,usec=(\d+)/gm)) micros[match[1]!] = Number(match[2]);
  return micros;
}

/** `after - before`, per command, leaving out the bench's own INFO and CLIENT calls. */
export function commandDelta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const delta: Record<string, number> = {};
  for (const [command, count] of Object.entries(after)) {
    if (command === "info" || command.startsWith("client") || command === "monitor") continue;
    const added = count - (before[command] ?? 0);
    if (added > 0) delta[command] = added;
  }
  return delta;
}

export function total(counts: Record<string, number>): number {
  return Object.values(counts).reduce((sum, count) => sum + count, 0);
}

/** `evalsha 3.00, set 1.00, ...` per unit, largest first. */
export function describeCounts(counts: Record<string, number>, per: number, limit = 12): string {
  return Object.entries(counts)
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([command, count]) => `${command} ${(count / per).toFixed(2)}`)
    .join(", ");
}

/**
 * Time Redis spends in each script and command, through the slow log with a threshold of 0 (every
 * call logged, with its duration): `start` before a window, `read` after. The log costs Redis CPU
 * of its own: measure in a run of its own (`BENCH_SCALE_SCRIPTS=1`), not one whose CPU is reported.
 */
export function scriptTimer(nodes: Redis[]): { start(): Promise<void>; read(): Promise<Record<string, { calls: number; micros: number }>> } {
  const names = scriptNames();
  return {
    async start() {
      for (const node of nodes) {
        await node.config("SET", "slowlog-log-slower-than", "0");
        await node.config("SET", "slowlog-max-len", "1000000");
        await node.slowlog("RESET");
      }
    },
    async read() {
      const times: Record<string, { calls: number; micros: number }> = {};
      for (const node of nodes) {
        const entries = (await node.slowlog("GET", 1_000_000)) as Array<[number, number, number, string[]]>;
        await node.config("SET", "slowlog-log-slower-than", "10000");
        for (const [, , micros, args] of entries) {
          const command = String(args[0]).toLowerCase();
          const name = command === "evalsha" ? `script ${names.get(String(args[1])) ?? String(args[1]).slice(0, 8)}` : command;
          if (name === "slowlog" || name === "config" || name === "info") continue;
          const time = (times[name] ??= { calls: 0, micros: 0 });
          time.calls += 1;
          time.micros += micros;
        }
      }
      return times;
    },
  };
}

/** sha → name of every script under src/ (their `lua` folders). */
function scriptNames(): Map<string, string> {
  const root = fileURLToPath(new URL("../src/", import.meta.url));
  const names = new Map<string, string>();
  const walk = (directory: string) => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const full = path.join(directory, entry.name);
      if (entry.isDirectory() && entry.name !== "includes") walk(full);
      else if (entry.isFile() && /-\d+\.lua$/.test(entry.name) && path.basename(directory) === "lua") {
        const script = loadScript(directory, entry.name);
        names.set(script.sha, script.name);
      }
    }
  };
  walk(root);
  return names;
}
