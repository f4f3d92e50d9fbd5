/**
 * Redis Sentinel for failover tests: a sentinel (`redis-server <config> --sentinel`) of the test's
 * own on a free loopback port, watching a primary under the name `mymaster`, quick to act (down
 * after 1 s). Stopped by pid; its directory (the config file it rewrites) removed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";

export interface OwnSentinel {
  port: number;
  stop(): Promise<void>;
}

export const SENTINEL_MASTER = "mymaster";

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function startSentinel(primaryPort: number, quorum = 2): Promise<OwnSentinel> {
  const directory = await mkdtemp(path.join(tmpdir(), "countbot-sentinel-"));
  const port = await freePort();
  const configFile = path.join(directory, "sentinel.conf");
  await writeFile(
    configFile,
    [
      `port ${port}`,
      "bind 127.0.0.1",
      `dir ${directory}`,
      `sentinel monitor ${SENTINEL_MASTER} 127.0.0.1 ${primaryPort} ${quorum}`,
      `sentinel down-after-milliseconds ${SENTINEL_MASTER} 1000`,
      `sentinel failover-timeout ${SENTINEL_MASTER} 5000`,
      `sentinel parallel-syncs ${SENTINEL_MASTER} 1`,
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn("redis-server", [configFile, "--sentinel"], { stdio: "ignore" });
  const probe = new Redis(port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on("error", () => undefined);
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`redis-sentinel on port ${port} did not start: ${String(error)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  probe.disconnect();
  return {
    port,
    async stop() {
      if (child.exitCode === null && child.signalCode === null && child.pid) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        process.kill(child.pid, "SIGKILL");
        await exited;
      }
      await rm(directory, { recursive: true, force: true });
    },
  };
}

/** The primary's port as the sentinel at `port` names it now. */
export async function primaryPortOf(port: number): Promise<number | undefined> {
  const sentinel = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1 });
  try {
    const address = (await sentinel.call("SENTINEL", "get-master-addr-by-name", SENTINEL_MASTER)) as [string, string] | null;
    return address ? Number(address[1]) : undefined;
  } finally {
    sentinel.disconnect();
  }
}

/** How many replicas the sentinel at `port` knows of the primary. */
export async function replicasSeenBy(port: number): Promise<number> {
  const sentinel = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1 });
  try {
    const replicas = (await sentinel.call("SENTINEL", "replicas", SENTINEL_MASTER)) as unknown[];
    return replicas.length;
  } finally {
    sentinel.disconnect();
  }
}
