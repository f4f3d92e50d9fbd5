/**
 * A Redis Cluster of the test's own: `redis-server --cluster-enabled yes` instances on free loopback
 * ports (no persistence), joined with `redis-cli --cluster create ... --cluster-yes`, each shard a
 * primary without replicas. Resolves once every node says cluster_state:ok; stopped by pid.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { Cluster, Redis } from "ioredis";
import { connectRedis } from "../../src/redis/client.js";

export interface OwnCluster {
  nodes: Array<{ host: string; port: number }>;
  /** A client for the whole cluster (the caller closes it). */
  connect(): Cluster;
  /** The client the bus gets in production: connectRedis's, with auto-pipelining (the caller closes it). */
  connectAsCountbot(): Cluster;
  /** Deletes every key whose hash tag starts with `{prefix`, on every shard. */
  deleteKeys(prefix: string): Promise<void>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function until(probe: () => Promise<boolean>, what: string, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export async function startRedisCluster(shards = 3): Promise<OwnCluster> {
  const directory = await mkdtemp(path.join(tmpdir(), "countbot-cluster-"));
  const children: ChildProcess[] = [];
  const nodes: Array<{ host: string; port: number }> = [];
  const stop = async () => {
    for (const child of children) {
      if (child.exitCode !== null || child.signalCode !== null || !child.pid) continue;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      process.kill(child.pid, "SIGKILL");
      await exited;
    }
    await rm(directory, { recursive: true, force: true });
  };
  try {
    for (let index = 0; index < shards; index += 1) {
      const port = await freePort();
      const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory];
      args.push("--cluster-enabled", "yes", "--cluster-config-file", `nodes-${port}.conf`, "--cluster-node-timeout", "2000", "--maxmemory-policy", "noeviction");
      children.push(spawn("redis-server", args, { stdio: "ignore" }));
      nodes.push({ host: "127.0.0.1", port });
    }
    for (const node of nodes) {
      await until(async () => {
        const probe = new Redis(node.port, node.host, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
        probe.on("error", () => undefined);
        try {
          await probe.connect();
          return (await probe.ping()) === "PONG";
        } finally {
          probe.disconnect();
        }
      }, `redis-server on port ${node.port}`);
    }
    await promisify(execFile)("redis-cli", ["--cluster", "create", ...nodes.map((node) => `${node.host}:${node.port}`), "--cluster-replicas", "0", "--cluster-yes"]);
    for (const node of nodes) {
      await until(async () => {
        const probe = new Redis(node.port, node.host, { maxRetriesPerRequest: 0 });
        try {
          return /cluster_state:ok/.test(String(await probe.call("CLUSTER", "INFO")));
        } finally {
          probe.disconnect();
        }
      }, `cluster_state:ok on port ${node.port}`);
    }
    // cluster_state:ok is each node's own view; right after the create, one node may still route a
    // slot to a node that does not own it (a MOVED a client then follows back and forth). Ready
    // once every node tells the same slot map and knows every node.
    await until(async () => {
      const views = await Promise.all(
        nodes.map(async (node) => {
          const probe = new Redis(node.port, node.host, { maxRetriesPerRequest: 0 });
          try {
            const slots = (await probe.call("CLUSTER", "SLOTS")) as Array<[number, number, [string, number, ...unknown[]]]>;
            const known = /cluster_known_nodes:(\d+)/.exec(String(await probe.call("CLUSTER", "INFO")))?.[1];
            return `${known} ${slots.map(([from, to, [, port]]) => `${from}-${to}:${port}`).sort().join(",")}`;
          } finally {
            probe.disconnect();
          }
        }),
      );
      return views.every((view) => view === views[0]) && views[0]!.startsWith(`${nodes.length} `);
    }, "every node to tell the same slot map");
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    nodes,
    connect: () => new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } }),
    connectAsCountbot: () => connectRedis(`redis://${nodes[0]!.host}:${nodes[0]!.port}`, { autoPipelining: true, cluster: nodes }) as unknown as Cluster,
    async deleteKeys(prefix) {
      for (const node of nodes) {
        const shard = new Redis(node.port, node.host);
        try {
          let cursor = "0";
          do {
            const [next, keys] = await shard.scan(cursor, "MATCH", `{${prefix}*`, "COUNT", 1000);
            cursor = next;
            // One key at a time: keys of different slots cannot go in one DEL on a cluster.
            for (const key of keys) await shard.del(key);
          } while (cursor !== "0");
        } finally {
          shard.disconnect();
        }
      }
    },
    stop,
  };
}
