/**
 * `scale`'s closed-loop rows: a gateway and 1, 2 and 4 workers on the bench's own Redis, CHATS chats
 * each sending its next message once the previous one is answered (no coalescing: one message, one
 * turn), a fake LLM answering at once. Per row: messages/s and its ratio to one worker, CPU per
 * message of the workers (summed) and of the gateway (/proc), Redis's own CPU per message and its
 * share of one core (INFO used_cpu_sys + used_cpu_user deltas), and the calls Redis executed per
 * message (INFO commandstats deltas: script calls and the commands inside them).
 */
import { Redis as RedisClient, type Redis } from "ioredis";
import { startRedisCluster } from "../tests/support/redis-cluster.js";
import { type ClosedLoopResult, closedLoops } from "./closed-loop.js";
import { describeCounts, total } from "./redis-meter.js";
import { type BenchProcess, type BenchSetup, TOKEN, assertNoErrors, meterFor, profileWindow, spawnCountbot } from "./scale.js";

const CLOSED_CHATS = Number(process.env.BENCH_SCALE_CLOSED_CHATS ?? 200);
const CLOSED_MESSAGES = Number(process.env.BENCH_SCALE_CLOSED_MESSAGES ?? 6_000);
const CLOSED_WORKERS = (process.env.BENCH_SCALE_CLOSED_WORKERS ?? "1,2,4").split(",").map(Number);

export interface ClosedRow {
  workers: number;
  result: ClosedLoopResult;
}

/**
 * `nodes`: a cluster's nodes (their CPU and commands summed) instead of the setup's one Redis;
 * `env`: variables the processes get beside the setup's (a cluster node's URL).
 */
export async function closedLoopRows(
  setup: BenchSetup,
  redisPid: number | undefined,
  label = "one Redis",
  extra: { redis?: Record<string, unknown>; nodes?: Array<{ client: Redis; pid: number }>; env?: Record<string, string> } = {},
): Promise<ClosedRow[]> {
  setup.setLlmDelay(0);
  const env = { ...(await setup.envFor(`closed-${label.replace(/\W+/g, "-")}`, extra)), ...extra.env };
  const gateway = spawnCountbot("gateway", env, /gateway listening/);
  const base = String((await gateway.ready).url);
  const workers: BenchProcess[] = [];
  const rows: ClosedRow[] = [];
  try {
    for (const count of CLOSED_WORKERS) {
      while (workers.length < count) {
        const worker = spawnCountbot("worker", env, /worker started/);
        await worker.ready;
        workers.push(worker);
      }
      const chats = (name: string) => Array.from({ length: CLOSED_CHATS }, (_, index) => `closed-${label.replace(/\W+/g, "-")}-${name}-${count}-${index}`);
      // Warm-up the size of a measured run: JIT and pools settle over thousands of turns. The first
      // row's is three times that: its gateway is new too, and after one run's size it still took
      // 1.6–1.9 times the CPU per message of the rows after (0.165 against 0.102 and 0.088 ms in
      // three 1-worker rows in a row).
      await closedLoops({ base, token: TOKEN, chatIds: chats("warm"), messages: rows.length === 0 ? 3 * CLOSED_MESSAGES : CLOSED_MESSAGES, messageTimeoutMs: 60_000 });
      const stopProfiles = await profileWindow(`closed-${count}`, [gateway, ...workers]);
      const result = await closedLoops({
        base,
        token: TOKEN,
        chatIds: chats("measured"),
        messages: CLOSED_MESSAGES,
        messageTimeoutMs: 60_000,
        meter: meterFor(setup, extra.nodes ? extra.nodes.map((node) => node.pid) : redisPid, gateway, workers),
        redis: extra.nodes ? extra.nodes.map((node) => node.client) : (setup.redis as Redis),
        onMeasured: stopProfiles,
      });
      if (result.lost + result.duplicates + result.outOfOrder > 0) {
        throw new Error(`closed loops, ${count} workers: ${result.lost} lost, ${result.duplicates} doubled, ${result.outOfOrder} out of order`);
      }
      assertNoErrors([gateway, ...workers]);
      rows.push({ workers: count, result });
      setup.resetLlmRecords();
    }
  } finally {
    await Promise.all([gateway, ...workers].map((service) => service.stop()));
  }
  printClosedRows(label, rows);
  return rows;
}

export function printClosedRows(label: string, rows: ClosedRow[]): void {
  console.log(`closed loops on ${label}: ${CLOSED_CHATS} chats, each sends its next message once the previous one is answered (one message per turn), ${CLOSED_MESSAGES} messages per row, fake LLM answering at once`);
  console.log(`  | workers | msgs/s | × one worker | worker CPU ms/msg | gateway ms/msg | Redis CPU | Redis ms/msg | Redis calls executed/msg | p99 |`);
  console.log(`  | --- | --- | --- | --- | --- | --- | --- | --- | --- |`);
  const first = rows[0]?.result.perSecond ?? 1;
  for (const { workers, result } of rows) {
    const perMessage = (ms: number | undefined) => ((ms ?? 0) / result.messages).toFixed(3);
    const redisMs = result.redisCpuMs ?? result.cpu.redis ?? 0;
    const executed = result.executed ? total(result.executed) / result.messages : Number.NaN;
    const sorted = [...result.latencies].sort((a, b) => a - b);
    const p99 = sorted[Math.ceil(sorted.length * 0.99) - 1] ?? 0;
    console.log(
      `  | ${workers} | ${result.perSecond.toFixed(0)} | ${(result.perSecond / first).toFixed(2)} | ${perMessage((result.cpu.worker ?? 0) + (result.cpu.workers ?? 0))} | ${perMessage(result.cpu.gateway)} | ${((redisMs / (result.seconds * 1000)) * 100).toFixed(0)} % | ${perMessage(redisMs)} | ${executed.toFixed(1)} | ${p99.toFixed(0)} ms |`,
    );
  }
  for (const { workers, result } of rows) {
    if (result.executed) console.log(`  ${workers} worker(s), executed per message: ${describeCounts(result.executed, result.messages, 24)}`);
    for (const [suffix, what, digits] of [[" syscalls", "read and write system calls", 1], [" bytes written", "bytes written", 0]] as const) {
      const counts = Object.entries(result.cpu).filter(([label]) => label.endsWith(suffix));
      if (counts.length > 0) console.log(`  ${workers} worker(s), ${what} per message: ${counts.map(([label, count]) => `${label.slice(0, -suffix.length)} ${(count / result.messages).toFixed(digits)}`).join(", ")}`);
    }
    if (result.executedMicros) console.log(`  ${workers} worker(s), µs executing per message (a script call's include its commands'): ${describeCounts(result.executedMicros, result.messages, 12)}`);
  }
}

/** The same rows on a Redis Cluster of three shards of the bench's own, the bus in 6 partitions (`BENCH_SCALE_CLUSTER=0`: not run). */
export async function clusterRows(setup: BenchSetup): Promise<ClosedRow[]> {
  const cluster = await startRedisCluster(3);
  const nodes = await Promise.all(
    cluster.nodes.map(async (node) => {
      const client = new RedisClient(node.port, node.host);
      return { client, pid: Number(/process_id:(\d+)/.exec(await client.info("server"))?.[1]) };
    }),
  );
  try {
    return await closedLoopRows(setup, undefined, "a 3-shard Redis Cluster, the bus in 6 partitions", {
      redis: { cluster: cluster.nodes, partitions: 6 },
      nodes,
      env: { REDIS_URL: `redis://127.0.0.1:${cluster.nodes[0]!.port}` },
    });
  } finally {
    for (const node of nodes) node.client.disconnect();
    await cluster.stop();
  }
}
