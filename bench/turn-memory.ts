/**
 * What one turn in flight costs a worker in memory: the figure `agent.maxConcurrentTurns`'s
 * default is derived from (README, "Concurrency").
 *
 * ONE real `countbot worker` on the bench's own Redis, with nothing capping its turns
 * (maxConcurrentTurns 10000), and the fake LLM (a process of its own) holding every call for
 * HOLD_MS. This process publishes straight onto the Redis bus. First every session gets a history
 * (ROUNDS instant turns each, MESSAGE_CHARS per message), then, for each count N, N sessions get one
 * message at once; once the fake LLM holds all N calls, the worker's JS heap after a forced GC
 * (inspector) and its VmRSS are sampled, and the calls are let go. The cost of a turn is the slope
 * between two counts: what the process holds anyway cancels out.
 */
import { readFile } from "node:fs/promises";
import { Redis } from "ioredis";
import { createRedisBus } from "../src/bus/redis-bus.js";
import type { InboundMessage } from "../src/bus/message.js";
import { type Inspector, connectInspector, inspectorUrlIn } from "./inspector.js";
import { startBenchRedis } from "./redis-meter.js";
import { type BenchProcess, createBenchSetup, spawnCountbot } from "./scale.js";

const COUNTS = (process.env.BENCH_TURN_MEMORY_COUNTS ?? "500,2000").split(",").map(Number);
const ROUNDS = Number(process.env.BENCH_TURN_MEMORY_ROUNDS ?? 5);
const MESSAGE_CHARS = 200;
const HOLD_MS = 60_000;
const CHANNEL = "bench";

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

async function rssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]) * 1024;
}

function message(round: number, session: number): InboundMessage {
  const text = `round ${round}, session ${session}: `;
  return {
    id: `r${round}-s${session}`,
    channel: CHANNEL,
    chatId: `s${session}`,
    senderId: "bench-user",
    content: text + "x".repeat(Math.max(0, MESSAGE_CHARS - text.length)),
    media: [],
    mentions: [],
    receivedAt: Date.now(),
    metadata: {},
  };
}

export async function benchTurnMemory(): Promise<void> {
  const redisServer = await startBenchRedis();
  const setup = await createBenchSetup("turn-memory", { redisUrl: redisServer.url });
  const bus = createRedisBus({ redis: new Redis(redisServer.url, { maxRetriesPerRequest: null }), prefix: setup.prefix, ownsConnection: true });
  let worker: BenchProcess | undefined;
  let inspector: Inspector | undefined;
  try {
    const sessions = Math.max(...COUNTS);
    setup.setLlmDelay(0);
    const env = await setup.envFor("turn-memory", { agent: { maxConcurrentTurns: 10_000 } });
    worker = spawnCountbot("worker", { ...env, NODE_OPTIONS: "--inspect=127.0.0.1:0" }, /worker started/);
    await worker.ready;
    const url = inspectorUrlIn(worker.tail());
    if (!url) throw new Error(`the worker printed no inspector URL:\n${worker.tail()}`);
    inspector = await connectInspector(url);

    let answered = 0;
    await bus.consumeOutbound(CHANNEL, async (event) => {
      if (event.type === "message" && event.message.kind === "final") answered += (event.message.metadata.answers as string[] | undefined)?.length ?? 1;
    });
    const waitFor = async (condition: () => boolean | Promise<boolean>, what: string, limitMs = 300_000) => {
      const deadline = Date.now() + limitMs;
      while (!(await condition())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    const publishRound = async (round: number, count: number) => {
      const target = answered + count;
      for (let start = 0; start < count; start += 500) {
        await Promise.all(Array.from({ length: Math.min(500, count - start) }, (_, index) => bus.publishInbound(message(round, start + index))));
      }
      return target;
    };

    // Histories first, at full speed.
    for (let round = 0; round < ROUNDS; round += 1) {
      const target = await publishRound(round, sessions);
      await waitFor(() => answered >= target, `history round ${round + 1}`);
    }

    const samples: Array<{ count: number; heap: number; rss: number }> = [];
    const idleHeap = await inspector.heapAfterGc();
    const idleRss = await rssBytes(worker.pid);
    for (const [index, count] of COUNTS.entries()) {
      setup.setLlmDelay(HOLD_MS);
      const before = (await setup.llmCalls()).starts.length;
      const target = await publishRound(ROUNDS + index, count);
      await waitFor(async () => (await setup.llmCalls()).starts.length >= before + count, `${count} calls held by the fake LLM`);
      // Everything of the turns is built by the time the call is sent; let stragglers settle.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      samples.push({ count, heap: await inspector.heapAfterGc(), rss: await rssBytes(worker.pid) });
      // Let them go: the held calls answer once their delay is over; later ones at once.
      setup.setLlmDelay(0);
      await waitFor(() => answered >= target, `the ${count} held turns`, HOLD_MS + 120_000);
    }
    if (worker.errors() > 0) throw new Error(`the worker logged ${worker.errors()} error lines:\n${worker.tail()}`);

    console.log(`turn memory: one countbot worker, nothing capping its turns, the fake LLM holding every call; ${ROUNDS} turns of history per session first (${MESSAGE_CHARS}-character messages)`);
    console.log(`  idle (after the history rounds)   JS heap after GC ${mib(idleHeap)}   VmRSS ${mib(idleRss)}`);
    for (const sample of samples) {
      console.log(`  ${String(sample.count).padStart(5)} turns in flight             JS heap after GC ${mib(sample.heap)}   VmRSS ${mib(sample.rss)}   (per turn over idle: heap ${kib((sample.heap - idleHeap) / sample.count)}, RSS ${kib((sample.rss - idleRss) / sample.count)})`);
    }
    if (samples.length >= 2) {
      const [low, high] = [samples[0]!, samples[samples.length - 1]!];
      const turns = high.count - low.count;
      console.log(`  slope ${low.count} → ${high.count} turns: JS heap ${kib((high.heap - low.heap) / turns)} per turn in flight, VmRSS ${kib((high.rss - low.rss) / turns)} per turn in flight`);
    }
  } finally {
    inspector?.close();
    await worker?.stop();
    await bus.close();
    await setup.close();
    await redisServer.stop();
  }
}
