/**
 * The runtime: CountBot's build in dist/ (what bin/countbot.js runs once `npm install` built it)
 * against the TypeScript sources through tsx (what it runs without a current build), in one run,
 * alternating: compiled, sources, compiled, sources.
 *
 * For each: `countbot gateway` and `countbot worker` on the bench's own Redis, the time and CPU each
 * takes until it says it is ready, then CHATS × MESSAGES messages through the web channel (fake
 * LLM answering at once) and the CPU per message and per turn of the two. Needs a current build
 * (`npm run build`).
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
// @ts-expect-error: plain JavaScript without types (it runs before anything is compiled)
import { buildIsCurrent } from "../bin/build-current.js";
import { countbotBin } from "../tests/support/run-cli.js";
import { startBenchRedis } from "./redis-meter.js";
import { type RunResult, assertClean, createBenchSetup, driveChats, meterFor, processCpuMs, spawnCountbot } from "./scale.js";

const CHATS = Number(process.env.BENCH_RUNTIME_CHATS ?? 200);
const MESSAGES = Number(process.env.BENCH_RUNTIME_MESSAGES ?? 5);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const sourcesBin = fileURLToPath(new URL("./sources-bin.js", import.meta.url));

interface Sample {
  variant: "compiled" | "sources";
  gatewayReadyMs: number;
  gatewayStartCpuMs: number;
  workerReadyMs: number;
  workerStartCpuMs: number;
  result: RunResult;
}

export async function benchRuntime(): Promise<void> {
  if (!(buildIsCurrent(root) as boolean)) {
    console.log("runtime: dist/ is missing or older than the sources: run `npm run build` first");
    return;
  }
  const redisServer = await startBenchRedis();
  const setup = await createBenchSetup("runtime", { redisUrl: redisServer.url });
  const samples: Sample[] = [];
  try {
    setup.setLlmDelay(0);
    const env = await setup.envFor("runtime");
    for (const variant of ["compiled", "sources", "compiled", "sources"] as const) {
      const bin = variant === "compiled" ? countbotBin : sourcesBin;
      const started = performance.now();
      const gateway = spawnCountbot("gateway", env, /gateway listening/, 60_000, bin);
      const base = String((await gateway.ready).url);
      const gatewayReadyMs = performance.now() - started;
      const gatewayStartCpuMs = processCpuMs(gateway.pid) ?? Number.NaN;
      const workerStarted = performance.now();
      const worker = spawnCountbot("worker", env, /worker started/, 60_000, bin);
      await worker.ready;
      const workerReadyMs = performance.now() - workerStarted;
      const workerStartCpuMs = processCpuMs(worker.pid) ?? Number.NaN;
      const chats = (label: string, count: number) => Array.from({ length: count }, (_, index) => `${label}-${samples.length}-${index}`);
      await driveChats(base, chats("warm", 50), 4, 60_000);
      const result = await driveChats(base, chats("run", CHATS), MESSAGES, 120_000, meterFor(setup, redisServer.pid, gateway, [worker]));
      assertClean(result, [gateway, worker]);
      samples.push({ variant, gatewayReadyMs, gatewayStartCpuMs, workerReadyMs, workerStartCpuMs, result });
      setup.resetLlmRecords();
      await worker.stop();
      await gateway.stop();
    }
  } finally {
    await setup.close();
    await redisServer.stop();
  }

  const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const perTurn = (result: RunResult) => ((result.cpu.gateway ?? 0) + (result.cpu.worker ?? 0)) / result.finals;
  const perMessage = (result: RunResult) => ((result.cpu.gateway ?? 0) + (result.cpu.worker ?? 0)) / result.messages;
  console.log(`runtime: dist/ (tsc) against the sources through tsx, alternating; ${CHATS} chats × ${MESSAGES} messages each time, fake LLM answering at once`);
  for (const sample of samples) {
    console.log(
      `  ${sample.variant.padEnd(8)}  gateway ready in ${seconds(sample.gatewayReadyMs)} (CPU ${seconds(sample.gatewayStartCpuMs)}), worker in ${seconds(sample.workerReadyMs)} (CPU ${seconds(sample.workerStartCpuMs)});` +
        `  gateway + worker CPU ${perMessage(sample.result).toFixed(2)} ms per message, ${perTurn(sample.result).toFixed(2)} ms per turn (${(sample.result.messages / sample.result.finals).toFixed(2)} messages per turn)`,
    );
  }
  const mean = (variant: Sample["variant"], pick: (sample: Sample) => number) => {
    const picked = samples.filter((sample) => sample.variant === variant).map(pick);
    return picked.reduce((sum, value) => sum + value, 0) / picked.length;
  };
  const ratio = (pick: (sample: Sample) => number) => (mean("compiled", pick) / mean("sources", pick)).toFixed(2);
  console.log(
    `  ratio compiled / sources: gateway start ${ratio((sample) => sample.gatewayReadyMs)} (CPU ${ratio((sample) => sample.gatewayStartCpuMs)}), worker start ${ratio((sample) => sample.workerReadyMs)} (CPU ${ratio((sample) => sample.workerStartCpuMs)}), CPU per turn ${ratio((sample) => perTurn(sample.result))}`,
  );
}
