/**
 * Scale-out figures with real processes (`countbot gateway` + `countbot worker`) on real Redis and
 * a fake OpenAI server, driven through the web channel (POST + WebSocket), from one run:
 *
 *   end to end   a fake LLM answering instantly; CHATS × MESSAGES sent as fast as possible (each
 *                chat sends its messages back to back, chats in parallel); messages/s and turns/s,
 *                the latency POST sent → final received on the WebSocket, one worker vs two; CPU
 *                per message and per turn of every process (/proc); the commands Redis executed
 *                (INFO commandstats) and, in a run of their own, the commands each process sent
 *                (MONITOR).
 *   concurrency  one worker with the default config, a fake LLM taking 1 s per call, 500 and then
 *                2,000 chats sending one message each at once: achieved messages/s over the ideal
 *                (all answered after one model call), beside the same ratio for the fake LLM alone
 *                (as many calls at once straight from the bench), so it shows which side binds.
 *
 * The processes run on a redis-server of the bench's own and the fake LLM in a process of its own
 * (keep-alive, long listen backlog), so each one's CPU is its own. Messages to one chat may
 * coalesce into one turn: a message counts as answered when its id is in a final's `answers`; a
 * message answered twice or before an earlier one of its chat fails the run. Every process started
 * here is stopped by pid, even on failure, and the run's Redis keys (a random prefix) are deleted.
 *
 * Also exports the process and fake-LLM helpers bench/memory.ts uses.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import WebSocket from "ws";
import OpenAI from "openai";
import { Agent } from "undici";
import { AgentSchema } from "../src/config/schema.js";
import { createConnectionPool } from "../src/providers/connection-pool.js";
import { sleep } from "../src/sleep.js";
import { deleteKeys, redisUrl } from "../tests/support/redis.js";
import { cleanEnvironment, countbotBin } from "../tests/support/run-cli.js";
import { type FakeLlmProcess, startFakeLlmProcess } from "./fake-llm.js";
import { connectInspector, inspectorUrlIn } from "./inspector.js";
import { type ClosedRow, closedLoopRows, clusterRows } from "./scale-closed.js";
import { type CommandCount, commandCounter, commandDelta, describeCounts, executedCommands, startBenchRedis, total } from "./redis-meter.js";

const CHATS = Number(process.env.BENCH_SCALE_CHATS ?? 200);
const MESSAGES_PER_CHAT = Number(process.env.BENCH_SCALE_MESSAGES ?? 10);
const REPEATS = Number(process.env.BENCH_SCALE_REPEATS ?? 3);
const CONCURRENT_CHATS = Number(process.env.BENCH_SCALE_CONCURRENT_CHATS ?? 500);
const MANY_CONCURRENT_CHATS = Number(process.env.BENCH_SCALE_MANY_CHATS ?? 2_000);
const SLOW_LLM_MS = 1_000;
export const TOKEN = "bench-scale-token-0123456789";
const DEFAULT_MAX_CONCURRENT_TURNS = AgentSchema.parse({}).maxConcurrentTurns;
/** nanobot runs at most this many turns at once by default. */
const NANOBOT_DEFAULT_TURNS = 3;

// ---------------------------------------------------------------------------------------------
// Processes

export interface BenchProcess {
  name: string;
  pid: number;
  /** The first log record whose `msg` matches; rejects on timeout or exit. */
  ready: Promise<Record<string, unknown>>;
  /** Log records at level error or above so far. */
  errors(): number;
  /** The last few KB of output, for error reports. */
  tail(): string;
  /** The process's inspector, when it opened one (BENCH_PROFILE_DIR). */
  inspectorUrl(): string | undefined;
  /** The exit code or signal once the process has exited, else undefined. */
  exitStatus(): string | undefined;
  stop(): Promise<void>;
}

/**
 * With BENCH_PROFILE_DIR set: profiles each process from now until the returned stop, and writes
 * `<dir>/<label>-<name>-<pid>.cpuprofile` (open them in Chrome DevTools). Otherwise does nothing.
 */
export async function profileWindow(label: string, processes: BenchProcess[]): Promise<() => Promise<void>> {
  const directory = process.env.BENCH_PROFILE_DIR;
  if (!directory) return async () => undefined;
  const sessions = await Promise.all(
    processes.map(async (service) => {
      const url = service.inspectorUrl();
      if (!url) return undefined;
      const inspector = await connectInspector(url);
      await inspector.call("Profiler.enable");
      await inspector.call("Profiler.setSamplingInterval", { interval: 500 });
      await inspector.call("Profiler.start");
      // BENCH_PROFILE_HEAP=1: where the window's allocations come from too (a sample every 32 KB).
      if (process.env.BENCH_PROFILE_HEAP === "1") await inspector.call("HeapProfiler.startSampling", { samplingInterval: 32_768, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
      return { service, inspector };
    }),
  );
  return async () => {
    await mkdir(directory, { recursive: true });
    for (const session of sessions) {
      if (!session) continue;
      const { profile } = await session.inspector.call("Profiler.stop");
      await writeFile(path.join(directory, `${label}-${session.service.name}-${session.service.pid}.cpuprofile`), JSON.stringify(profile));
      if (process.env.BENCH_PROFILE_HEAP === "1") {
        const { profile: heap } = await session.inspector.call("HeapProfiler.stopSampling");
        await writeFile(path.join(directory, `${label}-${session.service.name}-${session.service.pid}.heapprofile`), JSON.stringify(heap));
      }
      session.inspector.close();
    }
  };
}

const started = new Set<BenchProcess>();
let exitHookInstalled = false;

/**
 * Starts `countbot <command>` and waits for nothing: `ready` resolves with the first log line
 * matching `readyPattern`. Output is scanned for error-level lines and otherwise dropped (a run of
 * 100,000 turns logs 100,000 "turn finished" lines), keeping only a tail.
 */
/**
 * Which build `scale` runs, and a label its chat ids carry: with BENCH_SCALE_COMPARE_BIN set it
 * alternates between this checkout's and another's `bin/countbot.js`, on the same Redis and fake LLM.
 */
let scaleBin = countbotBin;
let scaleVariant = "";

export function spawnCountbot(command: string, env: Record<string, string>, readyPattern: RegExp, timeoutMs = 30_000, bin = scaleBin): BenchProcess {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // Last resort (an uncaught error, process.exit): never leave a child running.
    process.once("exit", () => {
      for (const service of started) killQuietly(service.pid, "SIGKILL");
    });
  }
  // BENCH_PROFILE_DIR: every CountBot process opens an inspector, through which each measured window is profiled.
  const profile = process.env.BENCH_PROFILE_DIR && !env.NODE_OPTIONS?.includes("--inspect") ? ["--inspect=127.0.0.1:0"] : [];
  const child: ChildProcess = spawn(process.execPath, [...profile, bin, command], { env: cleanEnvironment(env), stdio: ["ignore", "pipe", "pipe"] });
  if (child.pid === undefined) throw new Error(`could not start countbot ${command}`);
  const pid = child.pid;
  let tail = "";
  let inspector: string | undefined;
  let partial = "";
  let errors = 0;
  const errorLines: string[] = [];
  let readyFound: ((record: Record<string, unknown>) => void) | undefined;
  let exitStatus: string | undefined;
  const exited = new Promise<void>((resolve) => child.once("exit", (code, signal) => resolve(void (exitStatus = signal ?? `code ${code}`))));
  let hasExited = false;
  void exited.then(() => (hasExited = true));

  const onData = (chunk: Buffer) => {
    const text = chunk.toString("utf8");
    inspector ??= inspectorUrlIn(text);
    tail = (tail + text).slice(-8_000);
    partial += text;
    const lines = partial.split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      if (/"level":(5|6)\d/.test(line)) {
        errors += 1;
        if (errorLines.length < 5) errorLines.push(line.slice(0, 2_000));
      }
      if (readyFound && line.includes('"msg"')) {
        try {
          const record = JSON.parse(line) as Record<string, unknown>;
          if (readyPattern.test(String(record.msg))) {
            readyFound(record);
            readyFound = undefined;
          }
        } catch {
          // not a log record
        }
      }
    }
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);

  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`countbot ${command} (pid ${pid}) did not log ${readyPattern} within ${timeoutMs} ms:\n${tail}`)), timeoutMs);
    readyFound = (record) => {
      clearTimeout(timer);
      resolve(record);
    };
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`countbot ${command} (pid ${pid}) exited before logging ${readyPattern}:\n${tail}`));
    });
  });
  ready.catch(() => undefined);

  const service: BenchProcess = {
    name: command,
    pid,
    ready,
    errors: () => errors,
    inspectorUrl: () => inspector,
    exitStatus: () => exitStatus,
    tail: () => (errorLines.length > 0 ? `first error lines:\n${errorLines.join("\n")}\n--- last output:\n${tail.slice(-2_000)}` : tail),
    async stop() {
      started.delete(service);
      if (hasExited) return;
      killQuietly(pid, "SIGTERM");
      const killTimer = setTimeout(() => killQuietly(pid, "SIGKILL"), 10_000);
      await exited;
      clearTimeout(killTimer);
    },
  };
  started.add(service);
  return service;
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** CPU time (user + system, ms) a process has used so far, from /proc; undefined when unreadable. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/** The read and write system calls a process made so far (/proc/<pid>/io syscr + syscw), and the bytes it wrote (wchar: files, pipes and sockets). */
export function processIo(pid: number): { calls: number; written: number } | undefined {
  try {
    const io = readFileSync(`/proc/${pid}/io`, "utf8");
    const read = (name: string) => Number(new RegExp(`^${name}: (\\d+)`, "m").exec(io)?.[1] ?? Number.NaN);
    const calls = read("syscr") + read("syscw");
    return Number.isNaN(calls) ? undefined : { calls, written: read("wchar") };
  } catch {
    return undefined;
  }
}

/** Linux's USER_HZ, the unit of /proc/<pid>/stat times; 100 on every mainstream kernel. */
const CLOCK_TICKS = 100;

/** The Redis server's pid when it runs on this machine (same /proc), else undefined. */
export async function localRedisPid(redis: Redis): Promise<number | undefined> {
  const info = await redis.info("server");
  const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
  if (!Number.isInteger(pid)) return undefined;
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim().startsWith("redis") ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** CPU ms used so far by each labelled process; "bench" is this process. */
export type CpuMeter = () => Record<string, number>;

export function cpuMeter(processes: Array<{ label: string; pid: number }>): CpuMeter {
  return () => {
    const usage = process.cpuUsage();
    const sample: Record<string, number> = { bench: (usage.user + usage.system) / 1000 };
    for (const { label, pid } of processes) {
      const used = processCpuMs(pid);
      if (used !== undefined) sample[label] = (sample[label] ?? 0) + used;
      const io = processIo(pid);
      if (io !== undefined) {
        sample[`${label} syscalls`] = (sample[`${label} syscalls`] ?? 0) + io.calls;
        sample[`${label} bytes written`] = (sample[`${label} bytes written`] ?? 0) + io.written;
      }
    }
    return sample;
  };
}

/** Stops every process started by this module that is still running. */
export async function stopAllBenchProcesses(): Promise<void> {
  await Promise.all([...started].map((service) => service.stop()));
}

// ---------------------------------------------------------------------------------------------
// The shared set-up: a temp dir, a random Redis prefix, a fake LLM (in a process of its own) whose
// delay can be changed.

export interface BenchSetup {
  root: string;
  prefix: string;
  /** The Redis the processes use: the shared one (REDIS_URL), or the bench's own. */
  redisUrl: string;
  redis: Redis;
  llm: FakeLlmProcess;
  /** Delay of every fake LLM call from now on (applied in order with the other LLM calls). */
  setLlmDelay(ms: number): void;
  /** Start times (ms since the epoch) of the fake LLM calls since the last reset, and its connections so far. */
  llmCalls(): Promise<{ starts: number[]; connections: number }>;
  resetLlmRecords(): void;
  /** Writes a config file with this run's prefix plus `extra`, returns the env for a process. */
  envFor(name: string, extra?: { agent?: Record<string, unknown>; redis?: Record<string, unknown> }): Promise<Record<string, string>>;
  close(): Promise<void>;
}

export async function createBenchSetup(label: string, options: { redisUrl?: string } = {}): Promise<BenchSetup> {
  const root = await mkdtemp(path.join(tmpdir(), `countbot-bench-${label}-`));
  const prefix = `countbot-bench-${label}-${randomUUID()}`;
  const url = options.redisUrl ?? redisUrl;
  const redis = new Redis(url, { connectionName: "bench-setup" });
  const llm = await startFakeLlmProcess();
  // IPC keeps order: a delay set before a phase applies to every call of the phase.
  let pending: Promise<unknown> = Promise.resolve();
  const queue = (step: () => Promise<unknown>) => void (pending = pending.then(step).catch(() => undefined));
  return {
    root,
    prefix,
    redisUrl: url,
    redis,
    llm,
    setLlmDelay: (ms) => queue(() => llm.setDelay(ms)),
    llmCalls: async () => {
      await pending;
      return llm.calls();
    },
    resetLlmRecords: () => queue(() => llm.reset()),
    async envFor(name, extra = {}) {
      const configFile = path.join(root, `${name}.json`);
      // No tool runs here; exec off, or a machine without bubblewrap logs an error line at start.
      await writeFile(configFile, JSON.stringify({ redis: { prefix, ...extra.redis }, agent: { ...extra.agent }, tools: { exec: { enabled: false } } }));
      await pending;
      return {
        HOME: root,
        REDIS_URL: url,
        COUNTBOT_CONFIG: configFile,
        COUNTBOT_DATA_DIR: path.join(root, "data"),
        COUNTBOT_API_PORT: "0",
        COUNTBOT_API_TOKEN: TOKEN,
        OPENAI_API_KEY: "sk-bench-0123456789",
        OPENAI_BASE_URL: llm.url,
        COUNTBOT_MODEL: "openai/fake-instant",
        LOG_LEVEL: "info",
      };
    },
    async close() {
      await stopAllBenchProcesses();
      await llm.close().catch(() => undefined);
      await deleteKeys(redis, prefix).catch(() => undefined);
      await redis.quit().catch(() => undefined);
      await rm(root, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Driving the web channel

export interface RunResult {
  messages: number;
  seconds: number;
  perSecond: number;
  latencies: number[];
  /** Finals received: one per turn (a burst to one chat coalesces into one turn). */
  finals: number;
  /** Message ids answered by more than one final (must be 0). */
  duplicates: number;
  /** Messages answered before a message sent earlier to the same chat (must be 0). */
  outOfOrder: number;
  /** Time to get every POST answered with 202. */
  sendSeconds: number;
  /** performance.now() when the first POST was sent, and the same instant in ms since the epoch. */
  startedAt: number;
  startedAtEpoch: number;
  /** CPU ms used by each measured process between the first POST and the last answer. */
  cpu: Record<string, number>;
  /** Commands Redis executed meanwhile (INFO commandstats), when asked for. */
  executed?: Record<string, number>;
}

/**
 * Opens a socket per chat, then sends `perChat` messages to each chat (back to back within a chat,
 * chats in parallel), and waits until every message id has been answered by a final.
 */
export async function driveChats(
  base: string,
  chatIds: string[],
  perChat: number,
  timeoutMs: number,
  meter: CpuMeter = () => ({}),
  redis?: Redis,
  profiled: { label: string; processes: BenchProcess[] } = { label: "", processes: [] },
): Promise<RunResult> {
  const total = chatIds.length * perChat;
  const answeredAt = new Map<string, number>();
  const sentAt = new Map<string, number>();
  /** Per chat, the ids in the order they were sent, and how far the answers got. */
  const sentOrder = new Map<string, string[]>();
  let duplicates = 0;
  let outOfOrder = 0;
  let finals = 0;
  let finished!: () => void;
  const allAnswered = new Promise<void>((resolve) => (finished = resolve));

  const sockets = await Promise.all(
    chatIds.map(async (chatId) => {
      const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=${chatId}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      let answeredInChat = 0;
      socket.on("message", (data) => {
        const now = performance.now();
        const event = JSON.parse(String(data)) as { type: string; answers?: string[] };
        if (event.type !== "message") return;
        finals += 1;
        for (const id of event.answers ?? []) {
          if (answeredAt.has(id)) duplicates += 1;
          else answeredAt.set(id, now);
          // Answers come in the order the chat sent its messages, or the order is broken.
          const position = sentOrder.get(chatId)?.indexOf(id) ?? -1;
          if (position !== -1 && position < answeredInChat) outOfOrder += 1;
          answeredInChat = Math.max(answeredInChat, position + 1);
        }
        if (answeredAt.size >= total) finished();
      });
      await new Promise<void>((resolve, reject) => {
        socket.once("open", () => resolve());
        socket.once("error", reject);
      });
      return socket;
    }),
  );

  try {
    const executedBefore = redis ? await executedCommands(redis) : undefined;
    const stopProfiles = await profileWindow(profiled.label, profiled.processes);
    const cpuBefore = meter();
    const startedAt = performance.now();
    const startedAtEpoch = performance.timeOrigin + startedAt;
    await Promise.all(
      chatIds.map(async (chatId, chatIndex) => {
        const order: string[] = [];
        sentOrder.set(chatId, order);
        for (let message = 0; message < perChat; message += 1) {
          const sendStart = performance.now();
          const response = await loadGenerator.request({
            origin: new URL(base).origin,
            path: `/api/chat/${chatId}/messages`,
            method: "POST",
            headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
            body: JSON.stringify({ content: `chat ${chatIndex} message ${message}` }),
          });
          if (response.statusCode !== 202) throw new Error(`POST to ${chatId} answered ${response.statusCode}: ${await response.body.text()}`);
          const { id } = (await response.body.json()) as { id: string };
          sentAt.set(id, sendStart);
          order.push(id);
        }
      }),
    );
    const sendSeconds = (performance.now() - startedAt) / 1000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), timeoutMs)));
    const outcome = await Promise.race([allAnswered, timedOut]);
    clearTimeout(timer);
    if (outcome === "timeout") throw new Error(`only ${answeredAt.size} of ${total} messages answered within ${timeoutMs} ms`);
    const cpuAfter = meter();
    await stopProfiles();
    const cpu = Object.fromEntries(Object.entries(cpuAfter).map(([label, used]) => [label, used - (cpuBefore[label] ?? 0)]));
    const executed = redis && executedBefore ? commandDelta(executedBefore, await executedCommands(redis)) : undefined;

    const latencies: number[] = [];
    let lastAnswer = startedAt;
    for (const [id, sent] of sentAt) {
      const answered = answeredAt.get(id);
      if (answered === undefined) throw new Error(`message ${id} was never answered`);
      latencies.push(answered - sent);
      lastAnswer = Math.max(lastAnswer, answered);
    }
    const seconds = (lastAnswer - startedAt) / 1000;
    return { messages: total, seconds, perSecond: total / seconds, latencies, finals, duplicates, outOfOrder, sendSeconds, startedAt, startedAtEpoch, cpu, executed };
  } finally {
    for (const socket of sockets) socket.terminate();
  }
}

/**
 * The load generator's HTTP client: undici's own `request` over a keep-alive pool, about half the
 * CPU of fetch per POST, so the bench process is not what binds a burst (each chat still gets a
 * connection of its own while its POSTs are in flight, as separate browsers would).
 */
const loadGenerator = new Agent({ keepAliveTimeout: 30_000 });

export function percentile(values: number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))] ?? Number.NaN;
}

/** Most calls started within any window of `windowMs` (for 1 s calls: the peak in flight). */
function peakInWindow(starts: number[], windowMs: number): number {
  const sorted = [...starts].sort((a, b) => a - b);
  let peak = 0;
  let low = 0;
  for (let high = 0; high < sorted.length; high += 1) {
    while (sorted[high]! - sorted[low]! >= windowMs) low += 1;
    peak = Math.max(peak, high - low + 1);
  }
  return peak;
}

const ms = (value: number) => `${value.toFixed(0).padStart(5)} ms`;

function describeRun(result: RunResult): string {
  return (
    `${result.perSecond.toFixed(0).padStart(5)} msg/s ${(result.finals / result.seconds).toFixed(0).padStart(5)} turns/s   p50 ${ms(percentile(result.latencies, 0.5))}   p99 ${ms(percentile(result.latencies, 0.99))}` +
    `   (${result.messages} messages answered in ${result.seconds.toFixed(2)} s by ${result.finals} turns, ${(result.messages / result.finals).toFixed(2)} messages per turn; POSTs done at ${result.sendSeconds.toFixed(2)} s)`
  );
}

/** Where the CPU went: ms per message (and per turn) for each process, and how busy the machine was. */
function describeCpu(result: RunResult): string {
  const cpu = Object.entries(result.cpu).filter(([label]) => !label.endsWith(" syscalls") && !label.endsWith(" bytes written"));
  const per = (unit: number) =>
    cpu
      .map(([label, used]) => `${label} ${(used / unit).toFixed(2)}`)
      .join(", ");
  const countbot = (result.cpu.gateway ?? 0) + (result.cpu.worker ?? 0) + (result.cpu.workers ?? 0);
  const busy = cpu.reduce((sum, [, used]) => sum + used, 0) / (result.seconds * 1000);
  return (
    `CPU ms per message: ${per(result.messages)}; gateway + worker(s) ${(countbot / result.messages).toFixed(2)} per message, ${(countbot / result.finals).toFixed(2)} per turn\n` +
    `               CPU ms per turn: ${per(result.finals)}; these processes kept ${(busy * 100).toFixed(0)}% of ${cpuCount() * 100}% busy`
  );
}

function describeExecuted(result: RunResult): string {
  if (!result.executed) return "";
  const executed = total(result.executed);
  return `Redis executed ${(executed / result.messages).toFixed(1)} commands per message (${(executed / result.finals).toFixed(1)} per turn), counting those inside scripts: ${describeCounts(result.executed, result.messages, 10)}`;
}

export function assertClean(result: RunResult, processes: BenchProcess[]): void {
  if (result.duplicates > 0) throw new Error(`${result.duplicates} messages were answered twice`);
  if (result.outOfOrder > 0) throw new Error(`${result.outOfOrder} messages were answered out of their chat's order`);
  assertNoErrors(processes);
}

/** Fails when any of the processes logged an error line. */
export function assertNoErrors(processes: BenchProcess[]): void {
  const failing = processes.filter((service) => service.errors() > 0);
  if (failing.length > 0) {
    throw new Error(`error lines logged by ${failing.map((service) => `${service.name} ${service.pid} (${service.errors()})`).join(", ")}:\n${failing[0]!.tail()}`);
  }
}

export function meterFor(setup: BenchSetup, redisPid: number | number[] | undefined, gateway: BenchProcess, workers: BenchProcess[]): CpuMeter {
  return cpuMeter([
    { label: "gateway", pid: gateway.pid },
    ...workers.map((worker) => ({ label: workers.length > 1 ? "workers" : "worker", pid: worker.pid })),
    ...(redisPid === undefined ? [] : [redisPid].flat().map((pid) => ({ label: "redis", pid }))),
    { label: "fake LLM", pid: setup.llm.pid },
  ]);
}

// ---------------------------------------------------------------------------------------------

/** Several runs as one: messages over the summed time, latencies pooled. */
function pooled(runs: RunResult[]): RunResult {
  const sum = (pick: (run: RunResult) => number) => runs.reduce((total, run) => total + pick(run), 0);
  const add = (pick: (run: RunResult) => Record<string, number> | undefined) => {
    const summed: Record<string, number> = {};
    for (const run of runs) for (const [label, used] of Object.entries(pick(run) ?? {})) summed[label] = (summed[label] ?? 0) + used;
    return summed;
  };
  const seconds = sum((run) => run.seconds);
  return {
    messages: sum((run) => run.messages),
    seconds,
    perSecond: sum((run) => run.messages) / seconds,
    latencies: runs.flatMap((run) => run.latencies),
    finals: sum((run) => run.finals),
    duplicates: sum((run) => run.duplicates),
    outOfOrder: sum((run) => run.outOfOrder),
    sendSeconds: sum((run) => run.sendSeconds),
    startedAt: runs[0]!.startedAt,
    startedAtEpoch: runs[0]!.startedAtEpoch,
    cpu: add((run) => run.cpu),
    executed: runs.every((run) => run.executed) ? add((run) => run.executed) : undefined,
  };
}

/** The range of a figure over the runs, `low–high`. */
function range(runs: RunResult[], pick: (run: RunResult) => number, digits = 2): string {
  const values = runs.map(pick);
  return `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}`;
}

interface EndToEndResult {
  one: RunResult;
  two: RunResult;
  /** Redis commands clients sent, per message and per turn (MONITOR run). */
  sentPerMessage: number;
  sentPerTurn: number;
}

async function endToEnd(setup: BenchSetup, redisPid: number | undefined): Promise<EndToEndResult> {
  setup.setLlmDelay(0);
  const env = await setup.envFor("e2e");
  const gateway = spawnCountbot("gateway", env, /gateway listening/);
  const base = String((await gateway.ready).url);
  const first = spawnCountbot("worker", env, /worker started/);
  await first.ready;

  const chats = (label: string, count: number) => Array.from({ length: count }, (_, index) => `${scaleVariant}${label}-${index}`);
  const warmUp = async (label: string, size = 50) => {
    // JIT, connection pools; not counted.
    await driveChats(base, chats(label, size), 4, 60_000);
    setup.resetLlmRecords();
  };
  const measure = async (label: string, workers: BenchProcess[]) => {
    const result = await driveChats(base, chats(label, CHATS), MESSAGES_PER_CHAT, 120_000, meterFor(setup, redisPid, gateway, workers), setup.redis, {
      label: `e2e-${label}`,
      processes: [gateway, ...workers],
    });
    assertClean(result, [gateway, ...workers]);
    setup.resetLlmRecords();
    return result;
  };

  // Interleaved (one, two, one, two, ...) so that a burst of load from elsewhere on the machine
  // does not land on one row only.
  // Steady state: a first run the size of a measured one (JIT and pools settle over thousands of
  // turns; after 200 turns a run still took up to three times the CPU per message of a later one).
  await warmUp("warm-1", CHATS * Math.ceil(MESSAGES_PER_CHAT / 4));
  const ones: RunResult[] = [];
  const twos: RunResult[] = [];
  for (let repeat = 0; repeat < REPEATS; repeat += 1) {
    ones.push(await measure(`one-${repeat}`, [first]));
    const second = spawnCountbot("worker", env, /worker started/);
    await second.ready;
    await warmUp(`warm-2-${repeat}`);
    twos.push(await measure(`two-${repeat}`, [first, second]));
    await second.stop();
  }

  // What clients send, counted in a run of its own: MONITOR costs Redis CPU.
  const counter = await commandCounter(setup.redisUrl);
  let counted: RunResult;
  let count: CommandCount;
  try {
    await warmUp("warm-count");
    counter.reset();
    counted = await driveChats(base, chats("count", CHATS), MESSAGES_PER_CHAT, 120_000);
    assertClean(counted, [gateway, first]);
    // Deliveries acknowledge in batches after the final went out: let the last batch land.
    await sleep(1_500);
    count = await counter.read();
  } finally {
    await counter.close();
  }
  await first.stop();
  await gateway.stop();
  const one = pooled(ones);
  const two = pooled(twos);

  const ratio = (a: number, b: number) => (a / b).toFixed(2);
  console.log(`end to end: countbot gateway + worker processes on the bench's own Redis, web channel, fake LLM answering at once (delayMs 0)`);
  console.log(`  ${CHATS} chats × ${MESSAGES_PER_CHAT} messages per run, sent as fast as possible (back to back per chat, chats in parallel),`);
  console.log(`  ${REPEATS} runs per row, interleaved one/two; latency = POST sent → the final answering it received on the chat's WebSocket`);
  const countbotCpu = (run: RunResult) => ((run.cpu.gateway ?? 0) + (run.cpu.worker ?? 0) + (run.cpu.workers ?? 0)) / run.messages;
  const cpuOf = (run: RunResult) => `; gateway + worker CPU ${countbotCpu(run).toFixed(2)} ms per message`;
  for (let repeat = 0; repeat < REPEATS; repeat += 1) {
    console.log(`  run ${repeat + 1}  one worker   ${describeRun(ones[repeat]!)}${cpuOf(ones[repeat]!)}`);
    console.log(`  run ${repeat + 1}  two workers  ${describeRun(twos[repeat]!)}${cpuOf(twos[repeat]!)}`);
  }
  console.log(`  one worker   ${describeRun(one)}`);
  console.log(`               ${describeCpu(one)}`);
  console.log(`               gateway + worker CPU ms per message over the runs: ${range(ones, countbotCpu)}; Redis: ${range(ones, (run) => (run.cpu.redis ?? 0) / run.messages)}`);
  console.log(`               ${describeExecuted(one)}`);
  console.log(`  two workers  ${describeRun(two)}`);
  console.log(`               ${describeCpu(two)}`);
  console.log(
    `  ratio two/one: messages/s ${ratio(two.perSecond, one.perSecond)}, p50 ${ratio(percentile(two.latencies, 0.5), percentile(one.latencies, 0.5))}, p99 ${ratio(percentile(two.latencies, 0.99), percentile(one.latencies, 0.99))}`,
  );
  const sentTotal = Object.values(count.sent).reduce((sum, commands) => sum + total(commands), 0);
  console.log(
    `  Redis commands clients sent (MONITOR, one worker, a run of its own: ${counted.messages} messages in ${counted.finals} turns): ${(sentTotal / counted.messages).toFixed(2)} per message, ${(sentTotal / counted.finals).toFixed(2)} per turn`,
  );
  for (const [name, commands] of Object.entries(count.sent).sort((a, b) => total(b[1]) - total(a[1]))) {
    console.log(`    ${name.padEnd(18)} ${(total(commands) / counted.messages).toFixed(2).padStart(6)} per message: ${describeCounts(commands, counted.messages)}`);
  }
  console.log(`    inside scripts     ${(total(count.inScripts) / counted.messages).toFixed(2).padStart(6)} per message: ${describeCounts(count.inScripts, counted.messages)}`);
  console.log(`  (the bench process = HTTP + WebSocket client; the fake LLM runs in a process of its own; all share ${cpuCount()} cores)`);
  return { one, two, sentPerMessage: sentTotal / counted.messages, sentPerTurn: sentTotal / counted.finals };
}

/** The fake LLM alone: a burst's time, its ratio to the ideal, and the CPU per call of the bench (the SDK client) and of the fake server. */
type Ceiling = { seconds: number; ratio: number; cpuPerCall: { bench: number; fake: number } };

/**
 * The ceiling of the fake LLM and this machine: `chats` calls at once, straight from this process
 * through the OpenAI SDK, each taking `SLOW_LLM_MS`. Ratio to the ideal (every call done after
 * one delay), the same way CountBot's row is measured.
 */
async function fakeLlmCeiling(setup: BenchSetup, chats: number): Promise<{ cold: Ceiling; warm: Ceiling }> {
  // The same client as CountBot's provider: the SDK over a keep-alive pool with undici's request.
  const client = new OpenAI({ apiKey: "sk-bench-0123456789", baseURL: setup.llm.url, maxRetries: 0, timeout: 120_000, fetch: createConnectionPool().fetch });
  const call = async () => {
    const stream = await client.chat.completions.create({ model: "fake", stream: true, messages: [{ role: "user", content: "hello" }] });
    for await (const _chunk of stream) void _chunk;
  };
  const meter = cpuMeter([{ label: "fake", pid: setup.llm.pid }]);
  const burst = async (): Promise<Ceiling> => {
    const before = meter();
    const started = performance.now();
    await Promise.all(Array.from({ length: chats }, call));
    const seconds = (performance.now() - started) / 1000;
    const after = meter();
    const perCall = (label: string) => ((after[label] ?? 0) - (before[label] ?? 0)) / chats;
    return { seconds, ratio: SLOW_LLM_MS / 1000 / seconds, cpuPerCall: { bench: perCall("bench"), fake: perCall("fake") } };
  };
  // A few calls first (JIT), as CountBot's cold row gets; then the same burst again on the
  // connections the first one opened, as its warm row gets.
  await Promise.all(Array.from({ length: 20 }, call));
  const cold = await burst();
  const warm = await burst();
  setup.resetLlmRecords();
  return { cold, warm };
}

type ConcurrencyRow = {
  chats: number;
  burst: "cold" | "warm";
  result: RunResult;
  peak: number;
  firstCall: number;
  lastCall: number;
  connections: number;
  ceiling: Ceiling;
  /** CPU ms each process used from the first POST until the last model call started. */
  front: Record<string, number>;
};

/**
 * Samples a CPU meter every few ms while `run` runs; `at(ms)` then tells what each process had used
 * `ms` after `origin` (performance.now()), from the nearest sample at or after it.
 */
async function sampledCpu<T>(meter: CpuMeter, run: () => Promise<T>): Promise<{ value: T; at: (origin: number, ms: number) => Record<string, number> }> {
  const samples: Array<{ time: number; cpu: Record<string, number> }> = [];
  const timer = setInterval(() => samples.push({ time: performance.now(), cpu: meter() }), 10);
  try {
    const value = await run();
    samples.push({ time: performance.now(), cpu: meter() });
    const at = (origin: number, ms: number) => (samples.find((sample) => sample.time >= origin + ms) ?? samples.at(-1)!).cpu;
    return { value, at };
  } finally {
    clearInterval(timer);
  }
}

/**
 * What the CPU spent before the last model call started says of a burst's best ratio: every model
 * call waits `SLOW_LLM_MS`, and nothing a message needs before its call can overlap that wait for
 * the last one, so on `cores` cores the burst cannot end before that CPU / cores + the wait.
 */
function frontBound(row: ConcurrencyRow, processes = Object.keys(row.front)): { perMessage: number; ratio: number } {
  const spent = processes.reduce((sum, name) => sum + (row.front[name] ?? 0), 0);
  const wait = SLOW_LLM_MS / 1000;
  return { perMessage: spent / row.chats, ratio: wait / (wait + spent / 1000 / cpuCount()) };
}

async function concurrency(setup: BenchSetup, redisPid: number | undefined): Promise<ConcurrencyRow[]> {
  setup.setLlmDelay(SLOW_LLM_MS);
  const gatewayEnv = await setup.envFor("gateway");
  const gateway = spawnCountbot("gateway", gatewayEnv, /gateway listening/);
  const base = String((await gateway.ready).url);

  const rows: ConcurrencyRow[] = [];
  for (const chats of [CONCURRENT_CHATS, MANY_CONCURRENT_CHATS]) {
    const ceiling = await fakeLlmCeiling(setup, chats);
    const env = await setup.envFor(`${scaleVariant}concurrency-${chats}`);
    const worker = spawnCountbot("worker", env, /worker started/);
    await worker.ready;
    // Warm-up: a few slow turns.
    await driveChats(base, Array.from({ length: 20 }, (_, index) => `${scaleVariant}warm-c${chats}-${index}`), 1, 30_000);
    setup.resetLlmRecords();
    // Cold: the first burst this worker sees (its pool opens a connection per call in flight, the
    // JIT meets most paths for the first time). Warm: the same burst again, to other chats, right
    // after: what a worker that has been busy for a while does.
    for (const burst of ["cold", "warm"] as const) {
      const connectionsBefore = (await setup.llmCalls()).connections;
      const chatIds = Array.from({ length: chats }, (_, index) => `${scaleVariant}c${chats}-${burst}-${index}`);
      const label = `concurrency-${chats}-${burst}`;
      const meter = meterFor(setup, redisPid, gateway, [worker]);
      const sampled = await sampledCpu(meter, () => driveChats(base, chatIds, 1, 120_000, meter, undefined, { label, processes: [gateway, worker] }));
      const result = sampled.value;
      assertClean(result, [gateway, worker]);
      const calls = await setup.llmCalls();
      const starts = calls.starts.map((start) => start - result.startedAtEpoch);
      const lastCall = Math.max(...starts);
      const atStart = sampled.at(result.startedAt, 0);
      const atLastCall = sampled.at(result.startedAt, lastCall);
      rows.push({
        chats,
        burst,
        result,
        peak: peakInWindow(calls.starts, SLOW_LLM_MS),
        firstCall: Math.min(...starts),
        lastCall,
        front: Object.fromEntries(Object.entries(atLastCall).map(([name, used]) => [name, used - (atStart[name] ?? 0)])),
        connections: calls.connections - connectionsBefore,
        ceiling: ceiling[burst],
      });
      setup.resetLlmRecords();
    }
    await worker.stop();
  }
  await gateway.stop();

  console.log(`concurrency: one worker, default config (agent.maxConcurrentTurns ${DEFAULT_MAX_CONCURRENT_TURNS}), fake LLM taking ${SLOW_LLM_MS} ms per call, N chats sending one message each at once`);
  for (const row of rows) {
    const { chats, burst, result, peak, firstCall, lastCall, connections, ceiling } = row;
    const ideal = chats / (SLOW_LLM_MS / 1000);
    const ratio = result.perSecond / ideal;
    console.log(
      `  ${String(chats).padStart(5)} chats, ${burst}  ${result.perSecond.toFixed(1).padStart(6)} msg/s   ratio to ideal (${ideal.toFixed(0)}/s) ${ratio.toFixed(3)}` +
        `   the fake LLM's own ceiling here: ${ceiling.ratio.toFixed(3)} (${chats} calls straight from the bench: ${ceiling.seconds.toFixed(2)} s); CountBot's share of it ${(ratio / ceiling.ratio).toFixed(2)}`,
    );
    console.log(
      `    all answered at ${result.seconds.toFixed(2)} s; POSTs done at ${result.sendSeconds.toFixed(2)} s; LLM calls started from ${(firstCall / 1000).toFixed(2)} s to ${(lastCall / 1000).toFixed(2)} s, at most ${peak} within 1 s, over ${connections} new connections; latency p50 ${ms(percentile(result.latencies, 0.5))} p99 ${ms(percentile(result.latencies, 0.99))}`,
    );
    console.log(`    ${describeCpu(result)}`);
    const bound = frontBound(row);
    // The load generator and the fake LLM are not CountBot: what they spent caps any system measured here.
    const harness = frontBound(row, ["bench", "fake LLM"]);
    const front = Object.entries(row.front)
      .map(([name, used]) => `${name} ${(used / chats).toFixed(2)}`)
      .join(", ");
    console.log(
      `    before the last model call started, the processes used ${bound.perMessage.toFixed(2)} ms CPU per message (${front}): on ${cpuCount()} cores that alone caps the ratio at ${bound.ratio.toFixed(3)}` +
        ` (the bench and the fake LLM alone, ${harness.perMessage.toFixed(2)} ms: ${harness.ratio.toFixed(3)}, whatever CountBot costs)` +
        `; the fake LLM's ceiling run used ${ceiling.cpuPerCall.bench.toFixed(2)} ms per call in the bench (the OpenAI SDK client) and ${ceiling.cpuPerCall.fake.toFixed(2)} ms in the fake server`,
    );
  }
  const nanobot = NANOBOT_DEFAULT_TURNS / (SLOW_LLM_MS / 1000);
  console.log(`  nanobot's default (${NANOBOT_DEFAULT_TURNS} turns at once) would allow at most ${nanobot.toFixed(0)} msg/s here: ratio to ideal ${(nanobot / CONCURRENT_CHATS).toFixed(3)} at ${CONCURRENT_CHATS} chats`);
  return rows;
}

function cpuCount(): number {
  return availableParallelism();
}

export async function benchScale(): Promise<void> {
  // A Redis of the bench's own: its CPU and command counts are this run's alone.
  const redisServer = await startBenchRedis();
  const other = process.env.BENCH_SCALE_COMPARE_BIN;
  const variants = other ? [{ name: "this", bin: countbotBin }, { name: "other", bin: path.resolve(other) }] : [{ name: "", bin: countbotBin }];
  const rounds = other ? 2 : 1;
  const results: { variant: string; e2e?: EndToEndResult; rows?: ConcurrencyRow[]; closed?: ClosedRow[] }[] = [];
  try {
    const setup = await createBenchSetup("scale", { redisUrl: redisServer.url });
    try {
      const only = process.env.BENCH_SCALE_ONLY;
      // Alternating (this, other, this, other) so that a burst of load from elsewhere does not land on one build only.
      for (let round = 0; round < rounds; round += 1) {
        for (const variant of variants) {
          scaleBin = variant.bin;
          scaleVariant = variant.name ? `${variant.name}${round}-` : "";
          if (other) console.log(`\n=== ${variant.name} build (${variant.bin}), round ${round + 1} of ${rounds}`);
          const closed = only === undefined || only === "closed" ? await closedLoopRows(setup, redisServer.pid) : undefined;
          if ((only === undefined || only === "closed" || only === "cluster") && process.env.BENCH_SCALE_CLUSTER !== "0") await clusterRows(setup);
          const e2e = only === undefined || only === "end-to-end" ? await endToEnd(setup, redisServer.pid) : undefined;
          const rows = only === undefined || only === "concurrency" ? await concurrency(setup, redisServer.pid) : undefined;
          results.push({ variant: variant.name, e2e, rows, closed });
        }
      }
    } finally {
      await setup.close();
    }
  } finally {
    await redisServer.stop();
  }
  if (other) compareVariants(results);
}

/** The two builds side by side: each figure averaged over its rounds, and this build's over the other's. */
function compareVariants(results: { variant: string; e2e?: EndToEndResult; rows?: ConcurrencyRow[]; closed?: ClosedRow[] }[]): void {
  const figures = new Map<string, { this: number[]; other: number[] }>();
  const add = (name: string, variant: string, value: number) => {
    const entry = figures.get(name) ?? { this: [], other: [] };
    entry[variant as "this" | "other"].push(value);
    figures.set(name, entry);
  };
  for (const { variant, e2e, rows, closed } of results) {
    for (const { workers, result } of closed ?? []) {
      const perMessage = (ms: number | undefined) => (ms ?? 0) / result.messages;
      add(`closed loops, ${workers} worker(s): messages/s`, variant, result.perSecond);
      add(`closed loops, ${workers} worker(s): worker CPU ms per message`, variant, perMessage((result.cpu.worker ?? 0) + (result.cpu.workers ?? 0)));
      add(`closed loops, ${workers} worker(s): gateway CPU ms per message`, variant, perMessage(result.cpu.gateway));
      add(`closed loops, ${workers} worker(s): Redis CPU ms per message`, variant, perMessage(result.redisCpuMs ?? result.cpu.redis));
    }
    if (e2e) {
      const { one } = e2e;
      const countbot = (one.cpu.gateway ?? 0) + (one.cpu.worker ?? 0);
      add("end to end, one worker: messages/s", variant, one.perSecond);
      add("end to end, one worker: gateway + worker CPU ms per message", variant, countbot / one.messages);
      add("end to end, one worker: gateway + worker CPU ms per turn", variant, countbot / one.finals);
      add("end to end, one worker: gateway CPU ms per turn", variant, (one.cpu.gateway ?? 0) / one.finals);
      add("end to end, one worker: worker CPU ms per turn", variant, (one.cpu.worker ?? 0) / one.finals);
      add("end to end, one worker: Redis CPU ms per message", variant, (one.cpu.redis ?? 0) / one.messages);
      add("end to end: Redis commands clients sent per message", variant, e2e.sentPerMessage);
    }
    for (const row of rows ?? []) {
      add(`${row.chats} chats at once, ${row.burst}: ratio to ideal`, variant, row.result.perSecond / (row.chats / (SLOW_LLM_MS / 1000)));
      add(`${row.chats} chats at once, ${row.burst}: share of the fake LLM's ceiling`, variant, row.result.perSecond / (row.chats / (SLOW_LLM_MS / 1000)) / row.ceiling.ratio);
      add(`${row.chats} chats at once, ${row.burst}: gateway + worker CPU ms per turn`, variant, ((row.result.cpu.gateway ?? 0) + (row.result.cpu.worker ?? 0)) / row.result.finals);
    }
  }
  const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
  console.log(`\n=== this build against the other (${process.env.BENCH_SCALE_COMPARE_BIN}): means over the rounds, and this / other`);
  for (const [name, { this: mine, other }] of figures) {
    if (mine.length === 0 || other.length === 0) continue;
    console.log(`  ${name.padEnd(72)} this ${mean(mine).toFixed(3).padStart(8)}   other ${mean(other).toFixed(3).padStart(8)}   this/other ${(mean(mine) / mean(other)).toFixed(2)}`);
  }
}
