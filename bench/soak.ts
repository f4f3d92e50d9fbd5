/**
 * `npm run bench -- soak`: crash resume under load. A gateway and 4 workers on a redis-server of the
 * bench's own, a fake LLM answering at once, closed loops (each chat sends its next message once the
 * previous one is answered) for a minute, while a worker is SIGKILLed every few seconds (at least
 * BENCH_SOAK_KILL_EVERY_MS apart, with at most one replacement still starting) and a fresh one started in its place. Prints what the bus guarantees (0 lost, 0 doubled, 0 out of order) and
 * how long a message waited: the longest wait, and the p99 of the messages a killed worker held
 * (sent before a kill, answered after it). Fails when anything was lost, doubled or reordered, or
 * when that p99 is over 5 s.
 *
 * BENCH_SOAK_MS (60000), BENCH_SOAK_KILL_EVERY_MS (3000), BENCH_SOAK_CHATS (100), BENCH_SOAK_WORKERS (4), BENCH_SOAK_LEASE_TTL_MS (redis.leaseTtlMs; unset: the default).
 */
import { performance } from "node:perf_hooks";
import { closedLoops } from "./closed-loop.js";
import { startBenchRedis } from "./redis-meter.js";
import { type BenchProcess, TOKEN, createBenchSetup, percentile, spawnCountbot } from "./scale.js";

const SOAK_MS = Number(process.env.BENCH_SOAK_MS ?? 60_000);
const KILL_EVERY_MS = Number(process.env.BENCH_SOAK_KILL_EVERY_MS ?? 3_000);
const CHATS = Number(process.env.BENCH_SOAK_CHATS ?? 100);
const WORKERS = Number(process.env.BENCH_SOAK_WORKERS ?? 4);
/** `redis.leaseTtlMs` of every process (unset: the default). */
const LEASE_TTL_MS = process.env.BENCH_SOAK_LEASE_TTL_MS === undefined ? undefined : Number(process.env.BENCH_SOAK_LEASE_TTL_MS);
const HELD_P99_LIMIT_MS = 5_000;

export async function benchSoak(): Promise<void> {
  const redisServer = await startBenchRedis();
  const setup = await createBenchSetup("soak", { redisUrl: redisServer.url });
  try {
    setup.setLlmDelay(0);
    const env = await setup.envFor("soak", LEASE_TTL_MS === undefined ? {} : { redis: { leaseTtlMs: LEASE_TTL_MS } });
    const gateway = spawnCountbot("gateway", env, /gateway listening/);
    const base = String((await gateway.ready).url);
    const startWorker = async () => {
      // A busy machine may take long to start one: not what the soak measures.
      const worker = spawnCountbot("worker", env, /worker started/, 120_000);
      await worker.ready;
      return worker;
    };
    const workers: BenchProcess[] = await Promise.all(Array.from({ length: WORKERS }, startWorker));
    const chatIds = Array.from({ length: CHATS }, (_, index) => `soak-${index}`);
    // Warm-up: JIT and pools, not counted.
    await closedLoops({ base, token: TOKEN, chatIds: chatIds.map((chat) => `${chat}-warm`), messages: 2_000, messageTimeoutMs: 30_000 });

    const kills: number[] = [];
    const restarts: Array<Promise<void>> = [];
    let soaking = true;
    const killer = (async () => {
      let lastKill = performance.now();
      while (soaking) {
        // Every few seconds, while at most one replacement is still starting (on a busy machine that
        // takes seconds): fewer left up would measure a shortage of workers, not a takeover.
        const wait = lastKill + KILL_EVERY_MS - performance.now();
        if (wait > 0 || workers.length < WORKERS - 1) {
          await new Promise((resolve) => setTimeout(resolve, Math.max(wait, 50)));
          continue;
        }
        const [victim] = workers.splice(Math.floor(Math.random() * workers.length), 1);
        // A worker that exited by itself is a finding of the soak, not a kill to make.
        const status = victim!.exitStatus();
        if (status !== undefined) throw new Error(`soak: worker pid ${victim!.pid} exited by itself (${status}):\n${victim!.tail()}`);
        process.kill(victim!.pid, "SIGKILL");
        lastKill = performance.now();
        kills.push(lastKill);
        await victim!.stop();
        restarts.push(startWorker().then((worker) => void workers.push(worker)));
      }
    })();
    const sent: Array<{ at: number; waited: number }> = [];
    // The killer stops with the loops, also when they fail: else it went on killing while the
    // setup closed, and its own error (a worker the close had stopped) hid theirs.
    const result = await closedLoops({
      base,
      token: TOKEN,
      chatIds,
      durationMs: SOAK_MS,
      messageTimeoutMs: 60_000,
      onAnswered: (sentAt, waited) => sent.push({ at: sentAt, waited }),
    }).finally(() => (soaking = false));
    await killer;
    await Promise.all(restarts);
    // Held by a killed worker: sent before a kill and answered after it.
    const held = sent.filter(({ at, waited }) => kills.some((kill) => at <= kill && at + waited >= kill)).map(({ waited }) => waited);
    const heldP99 = held.length > 0 ? percentile(held, 0.99) : 0;
    const killsDuring = (at: number, waited: number) => kills.filter((kill) => at <= kill && at + waited >= kill).length;
    const longest = [...sent].sort((a, b) => b.waited - a.waited).slice(0, 5);
    console.log(`soak: ${WORKERS} workers, one SIGKILLed every ${KILL_EVERY_MS} ms and restarted (${kills.length} kills), ${CHATS} chats in closed loops for ${(result.seconds).toFixed(0)} s`);
    console.log(`  ${result.messages} messages (${result.perSecond.toFixed(0)}/s): ${result.lost} lost, ${result.duplicates} doubled, ${result.outOfOrder} out of order`);
    console.log(
      `  wait: p50 ${percentile(result.latencies, 0.5).toFixed(0)} ms, p99 ${percentile(result.latencies, 0.99).toFixed(0)} ms, longest ${result.longestWaitMs.toFixed(0)} ms; ` +
        `the ${held.length} messages a killed worker held: p50 ${held.length > 0 ? percentile(held, 0.5).toFixed(0) : "-"} ms, p99 ${heldP99.toFixed(0)} ms`,
    );
    console.log(`  the longest waits, with the kills during each: ${longest.map(({ at, waited }) => `${waited.toFixed(0)} ms (${killsDuring(at, waited)})`).join(", ")}`);
    await Promise.all([gateway, ...workers].map((service) => service.stop()));
    if (result.lost + result.duplicates + result.outOfOrder > 0) throw new Error(`soak: ${result.lost} lost, ${result.duplicates} doubled, ${result.outOfOrder} out of order`);
    if (heldP99 > HELD_P99_LIMIT_MS) throw new Error(`soak: the messages a killed worker held waited ${heldP99.toFixed(0)} ms at p99 (over ${HELD_P99_LIMIT_MS} ms)`);
  } finally {
    await setup.close();
    await redisServer.stop();
  }
}
