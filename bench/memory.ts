/**
 * Worker memory under many sessions: ONE real `countbot worker` process on real Redis with a fake
 * LLM answering at once. This process publishes straight onto the Redis bus (same prefix, channel
 * `bench`) in rounds: ROUNDS × SESSIONS messages, one per session per round, sessions
 * 0..SESSIONS-1 reused every round (default 10 × 10,000 = 100,000 messages across 10,000
 * sessions). It counts the `answers` of the finals on the `bench` outbound stream (consumed here,
 * so the stream stays short) to know when a round is done, then samples the worker's VmRSS from
 * /proc/<pid>/status, and its JS heap after a forced GC through the inspector protocol.
 *
 * A last round goes to SESSIONS sessions never seen before: memory held per session would show
 * there as a step the size of SESSIONS × (bytes per session).
 */
import { readFile } from "node:fs/promises";
import { Redis } from "ioredis";
import { createRedisBus } from "../src/bus/redis-bus.js";
import type { InboundMessage, OutboundMessage } from "../src/bus/message.js";
import { redisUrl } from "../tests/support/redis.js";
import { type BenchProcess, createBenchSetup, processCpuMs, spawnCountbot } from "./scale.js";

const ROUNDS = Number(process.env.BENCH_MEMORY_ROUNDS ?? 10);
const SESSIONS = Number(process.env.BENCH_MEMORY_SESSIONS ?? 10_000);
/** Rounds before this one are warm-up (JIT, heap sizing, every session's first turn). */
const FIRST_AFTER_WARMUP = 1;
const ROUND_TIMEOUT_MS = Number(process.env.BENCH_MEMORY_ROUND_TIMEOUT_MS ?? 120_000);
/** The whole bench gives up (and stops the worker) after this long. */
const DEADLINE_MS = Number(process.env.BENCH_MEMORY_DEADLINE_MS ?? 600_000);
const PUBLISH_IN_FLIGHT = 500;
const CHANNEL = "bench";

interface Sample {
  label: string;
  messages: number;
  seconds: number;
  rssKiB: number;
  heapUsedBytes?: number;
  workerCpuMs?: number;
}

/** VmRSS (or another Vm* field) of a process, in KiB. */
export async function vmField(pid: number, field: "VmRSS" | "VmHWM"): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
  if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(match[1]);
}

import { connectInspector } from "./inspector.js";

export { connectInspector };

function message(round: number, session: number): InboundMessage {
  return {
    id: `r${round}-s${session}`,
    channel: CHANNEL,
    chatId: `s${session}`,
    senderId: "bench-user",
    content: `round ${round}: hello from session ${session}`,
    media: [],
    mentions: [],
    receivedAt: Date.now(),
    metadata: {},
  };
}

const mib = (kib: number) => `${(kib / 1024).toFixed(1).padStart(6)} MiB`;

export async function benchMemory(): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  const setup = await createBenchSetup("memory");
  const bus = createRedisBus({ redis: new Redis(redisUrl), prefix: setup.prefix, ownsConnection: true });
  let worker: BenchProcess | undefined;
  let inspector: Awaited<ReturnType<typeof connectInspector>> | undefined;
  try {
    setup.setLlmDelay(0);
    const env = await setup.envFor("memory");
    // The inspector (loopback, random port) lets the bench force a GC and read the JS heap.
    worker = spawnCountbot("worker", { ...env, NODE_OPTIONS: "--inspect=127.0.0.1:0" }, /worker started/);
    await worker.ready;
    const inspectorUrl = /Debugger listening on (ws:\/\/\S+)/.exec(worker.tail())?.[1];
    if (inspectorUrl) inspector = await connectInspector(inspectorUrl);
    const pid = worker.pid;

    let answered = 0;
    let duplicates = 0;
    const seen = new Set<string>();
    let roundDone: (() => void) | undefined;
    let target = 0;
    await bus.consumeOutbound(CHANNEL, async (event) => {
      if (event.type !== "message" || event.message.kind !== "final") return;
      for (const id of ((event.message as OutboundMessage).metadata.answers as string[] | undefined) ?? []) {
        if (seen.has(id)) duplicates += 1;
        seen.add(id);
        answered += 1;
      }
      if (answered >= target) roundDone?.();
    });

    const sample = async (label: string, messages: number, seconds: number): Promise<Sample> => {
      const rssKiB = await vmField(pid, "VmRSS");
      let heapUsedBytes: number | undefined;
      if (inspector) {
        await inspector.call("HeapProfiler.collectGarbage");
        heapUsedBytes = Number((await inspector.call("Runtime.getHeapUsage")).usedSize);
      }
      return { label, messages, seconds, rssKiB, heapUsedBytes, workerCpuMs: processCpuMs(pid) };
    };

    const runRound = async (round: number, label: string, firstSession: number): Promise<Sample> => {
      seen.clear();
      target = answered + SESSIONS;
      const done = new Promise<void>((resolve) => (roundDone = resolve));
      const started = performance.now();
      for (let offset = 0; offset < SESSIONS; offset += PUBLISH_IN_FLIGHT) {
        const batch = [];
        for (let session = offset; session < Math.min(SESSIONS, offset + PUBLISH_IN_FLIGHT); session += 1) {
          batch.push(bus.publishInbound(message(round, firstSession + session)));
        }
        await Promise.all(batch);
      }
      let timer: NodeJS.Timeout | undefined;
      const limitMs = Math.max(0, Math.min(ROUND_TIMEOUT_MS, deadline - Date.now()));
      const timedOut = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), limitMs)));
      const outcome = await Promise.race([done, timedOut]);
      clearTimeout(timer);
      if (outcome === "timeout") throw new Error(`${label}: only ${answered - (target - SESSIONS)} of ${SESSIONS} messages answered within ${limitMs} ms (round limit ${ROUND_TIMEOUT_MS} ms, bench deadline ${DEADLINE_MS} ms)`);
      const seconds = (performance.now() - started) / 1000;
      // The fake LLM keeps every request body: drop them, they are the bench's memory, not the worker's.
      setup.resetLlmRecords();
      if (worker!.errors() > 0) throw new Error(`the worker logged ${worker!.errors()} error lines:\n${worker!.tail()}`);
      return sample(label, SESSIONS, seconds);
    };

    const samples: Sample[] = [await sample("idle, before any message", 0, 0)];
    const overallStart = performance.now();
    for (let round = 0; round < ROUNDS; round += 1) {
      samples.push(await runRound(round, `round ${String(round + 1).padStart(2)}`, 0));
    }
    const totalSeconds = (performance.now() - overallStart) / 1000;
    const fresh = await runRound(ROUNDS, `+1 round, ${SESSIONS} new sessions`, SESSIONS);
    const peakKiB = await vmField(pid, "VmHWM");
    if (duplicates > 0) throw new Error(`${duplicates} messages were answered twice`);

    const rounds = samples.slice(1);
    const firstAfterWarmup = rounds[FIRST_AFTER_WARMUP]!;
    const last = rounds[rounds.length - 1]!;
    const heap = (bytes: number | undefined) => (bytes === undefined ? "" : `   JS heap after GC ${mib(bytes / 1024)}`);
    console.log(`memory: one countbot worker process, fake LLM answering at once, messages published straight onto the Redis bus`);
    console.log(`  ${ROUNDS} rounds × ${SESSIONS} messages, one per session, the same ${SESSIONS} sessions every round (history grows to ${ROUNDS * 2} entries per session)`);
    let cumulative = 0;
    let previousCpu: number | undefined;
    for (const entry of [...samples, fresh]) {
      cumulative += entry.messages;
      const rate = entry.seconds > 0 ? `${(entry.messages / entry.seconds).toFixed(0).padStart(5)} msg/s` : " ".repeat(11);
      const cpu =
        entry.messages > 0 && entry.workerCpuMs !== undefined && previousCpu !== undefined
          ? `   worker CPU ${((entry.workerCpuMs - previousCpu) / entry.messages).toFixed(2)} ms/msg`
          : "";
      previousCpu = entry.workerCpuMs;
      console.log(`  ${entry.label.padEnd(34)} ${String(cumulative).padStart(7)} msgs  ${rate}   VmRSS ${mib(entry.rssKiB)}${heap(entry.heapUsedBytes)}${cpu}`);
    }
    console.log(`  ${ROUNDS * SESSIONS} messages in ${totalSeconds.toFixed(0)} s (${((ROUNDS * SESSIONS) / totalSeconds).toFixed(0)} msg/s); peak VmRSS (VmHWM) ${mib(peakKiB)}`);
    console.log(
      `  ratio VmRSS round ${ROUNDS} / round ${FIRST_AFTER_WARMUP + 1} (first after warm-up): ${(last.rssKiB / firstAfterWarmup.rssKiB).toFixed(3)}` +
        (last.heapUsedBytes && firstAfterWarmup.heapUsedBytes ? `; JS heap after GC: ${(last.heapUsedBytes / firstAfterWarmup.heapUsedBytes).toFixed(3)}` : ""),
    );
    console.log(
      `  ratio VmRSS after ${SESSIONS} new sessions / round ${ROUNDS}: ${(fresh.rssKiB / last.rssKiB).toFixed(3)}` +
        (fresh.heapUsedBytes && last.heapUsedBytes ? `; JS heap after GC: ${(fresh.heapUsedBytes / last.heapUsedBytes).toFixed(3)}` : ""),
    );
    if (ROUNDS - 1 > FIRST_AFTER_WARMUP && last.heapUsedBytes && firstAfterWarmup.heapUsedBytes && fresh.heapUsedBytes) {
      const reused = (last.heapUsedBytes - firstAfterWarmup.heapUsedBytes) / ((ROUNDS - 1 - FIRST_AFTER_WARMUP) * SESSIONS);
      const added = (fresh.heapUsedBytes - last.heapUsedBytes) / SESSIONS;
      console.log(
        `  JS heap kept per message (after GC): ${reused.toFixed(0)} bytes in rounds ${FIRST_AFTER_WARMUP + 2}..${ROUNDS} (same sessions), ${added.toFixed(0)} bytes in the round of new sessions` +
          ` (the difference, ${(added - reused).toFixed(0)} bytes, is what a new session costs)`,
      );
    }
  } finally {
    inspector?.close();
    await worker?.stop();
    await bus.close();
    await setup.close();
  }
}
