/**
 * `countbot start` memory: ONE real `countbot start` process (memory bus, file store, everything in
 * one process) and a fake OpenAI server answering at once, driven through the web channel the way
 * pages use it: for each message a socket to its chat opens, the message is POSTed, the final
 * answering it arrives on the socket, the socket closes. IN_FLIGHT chats are served at a time.
 *
 * MESSAGES over CHATS chats (default 100,000 over 10,000), in rounds of one message per chat, the
 * same chats every round. After each round this process samples the server's VmRSS, forces a GC
 * in it through the inspector protocol, and samples its VmRSS and JS heap again: memory held per
 * message would make every round step up. A last round goes to CHATS chats never seen before, to show what a chat costs.
 *
 *   npm run bench -- start-memory
 *   BENCH_START_MESSAGES=20000 BENCH_START_CHATS=5000 npm run bench -- start-memory
 *
 * BENCH_START_SNAPSHOT_DIR=<dir> also writes a heap snapshot of the server after each round (to
 * compare two in Chrome DevTools' Memory tab: "Comparison", by retainers). Every process started
 * here is stopped by pid, even on failure.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import WebSocket from "ws";
import { type FakeOpenAIServer, startFakeOpenAI } from "../tests/support/fake-openai-server.js";
import { connectInspector, vmField } from "./memory.js";
import { type BenchProcess, processCpuMs, spawnCountbot } from "./scale.js";

const MESSAGES = Number(process.env.BENCH_START_MESSAGES ?? 100_000);
const CHATS = Number(process.env.BENCH_START_CHATS ?? 10_000);
const IN_FLIGHT = Number(process.env.BENCH_START_IN_FLIGHT ?? 100);
const SNAPSHOT_DIR = process.env.BENCH_START_SNAPSHOT_DIR;
const ROUNDS = Math.max(1, Math.round(MESSAGES / CHATS));
/** Rounds before this index are warm-up: JIT, heap sizing, every chat's first turn. */
const FIRST_AFTER_WARMUP = ROUNDS > 2 ? 1 : 0;
const MESSAGE_TIMEOUT_MS = 60_000;
const TOKEN = "bench-start-token-0123456789";

interface Sample {
  label: string;
  messages: number;
  seconds: number;
  /** VmRSS as the process runs, and right after a forced GC. */
  rssKiB: number;
  rssAfterGcKiB: number;
  heapUsedBytes?: number;
  cpuMs?: number;
}

/** Opens a socket to the chat, posts one message, resolves once a final answering it arrived. */
async function oneMessage(base: string, chatId: string, content: string): Promise<void> {
  const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=${chatId}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const answered = new Set<string>();
  let wanted: string | undefined;
  let done!: () => void;
  const arrived = new Promise<void>((resolve) => (done = resolve));
  socket.on("message", (data) => {
    const event = JSON.parse(String(data)) as { type: string; answers?: string[] };
    if (event.type !== "message") return;
    for (const id of event.answers ?? []) answered.add(id);
    if (wanted !== undefined && answered.has(wanted)) done();
  });
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once("open", () => resolve());
      socket.once("error", reject);
    });
    const response = await fetch(`${base}/api/chat/${chatId}/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ content }),
    });
    if (response.status !== 202) throw new Error(`POST to ${chatId} answered ${response.status}: ${await response.text()}`);
    wanted = ((await response.json()) as { id: string }).id;
    // The final may have come before the POST's answer did.
    if (answered.has(wanted)) done();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), MESSAGE_TIMEOUT_MS)));
    const outcome = await Promise.race([arrived, timedOut]);
    clearTimeout(timer);
    if (outcome === "timeout") throw new Error(`message ${wanted} to ${chatId} not answered within ${MESSAGE_TIMEOUT_MS} ms`);
  } finally {
    socket.close();
  }
}

/** One message to each of `count` chats named `<label>-<n>`, IN_FLIGHT chats at a time. */
async function round(base: string, label: string, count: number, roundIndex: number): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let chat = next++; chat < count; chat = next++) await oneMessage(base, `${label}-${chat}`, `round ${roundIndex}: hello from chat ${chat}`);
  };
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, count) }, lane));
}

const mib = (kib: number) => `${(kib / 1024).toFixed(1).padStart(6)} MiB`;

export async function benchStartMemory(): Promise<void> {
  const root = await mkdtemp(path.join(tmpdir(), "countbot-bench-start-"));
  let llm: FakeOpenAIServer | undefined;
  let server: BenchProcess | undefined;
  let inspector: Awaited<ReturnType<typeof connectInspector>> | undefined;
  try {
    llm = await startFakeOpenAI({ script: () => ({ text: "ok, noted." }) });
    const configFile = path.join(root, "countbot.json");
    // No exec tool: without bubblewrap it would log an error at start-up, and no turn here uses it.
    await writeFile(configFile, JSON.stringify({ tools: { exec: { enabled: false } } }));
    if (SNAPSHOT_DIR) await mkdir(SNAPSHOT_DIR, { recursive: true });
    const nodeOptions = ["--inspect=127.0.0.1:0", ...(SNAPSHOT_DIR ? ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${SNAPSHOT_DIR}`] : [])];
    // No REDIS_URL: the in-memory bus and the file store under the data directory.
    server = spawnCountbot(
      "start",
      {
        HOME: root,
        COUNTBOT_CONFIG: configFile,
        COUNTBOT_DATA_DIR: path.join(root, "data"),
        COUNTBOT_WORKSPACE: path.join(root, "workspace"),
        COUNTBOT_API_PORT: "0",
        COUNTBOT_API_TOKEN: TOKEN,
        OPENAI_API_KEY: "sk-bench-0123456789",
        OPENAI_BASE_URL: llm.url,
        COUNTBOT_MODEL: "openai/fake-instant",
        LOG_LEVEL: "info",
        NODE_OPTIONS: nodeOptions.join(" "),
      },
      /countbot started/,
    );
    const base = String((await server.ready).url);
    const inspectorUrl = /Debugger listening on (ws:\/\/\S+)/.exec(server.tail())?.[1];
    if (inspectorUrl) inspector = await connectInspector(inspectorUrl);
    const pid = server.pid;

    const sample = async (label: string, messages: number, seconds: number): Promise<Sample> => {
      const rssKiB = await vmField(pid, "VmRSS");
      let heapUsedBytes: number | undefined;
      if (inspector) {
        await inspector.call("HeapProfiler.collectGarbage");
        heapUsedBytes = Number((await inspector.call("Runtime.getHeapUsage")).usedSize);
      }
      if (SNAPSHOT_DIR) process.kill(pid, "SIGUSR2");
      return { label, messages, seconds, rssKiB, rssAfterGcKiB: await vmField(pid, "VmRSS"), heapUsedBytes, cpuMs: processCpuMs(pid) };
    };
    const timed = async (label: string, run: () => Promise<void>): Promise<Sample> => {
      const started = performance.now();
      await run();
      const seconds = (performance.now() - started) / 1000;
      // The fake server keeps every request body: the bench's memory, not the server's.
      llm!.requests.length = 0;
      if (server!.errors() > 0) throw new Error(`countbot start logged ${server!.errors()} error lines:\n${server!.tail()}`);
      return sample(label, CHATS, seconds);
    };

    const samples: Sample[] = [await sample("idle, before any message", 0, 0)];
    for (let index = 0; index < ROUNDS; index += 1) {
      samples.push(await timed(`round ${String(index + 1).padStart(2)}`, () => round(base, "chat", CHATS, index)));
    }
    const fresh = await timed(`+1 round, ${CHATS} new chats`, () => round(base, "new", CHATS, ROUNDS));
    const peakKiB = await vmField(pid, "VmHWM");

    const rounds = samples.slice(1);
    const first = rounds[FIRST_AFTER_WARMUP]!;
    const last = rounds[rounds.length - 1]!;
    const heap = (bytes: number | undefined) => (bytes === undefined ? "" : `   JS heap after GC ${mib(bytes / 1024)}`);
    console.log(`start memory: one \`countbot start\` process (memory bus, file store), fake LLM answering at once, web channel`);
    console.log(`  ${ROUNDS} rounds × ${CHATS} chats, one message per chat per round (a socket opened, the message posted, its final received, the socket closed), ${IN_FLIGHT} chats at a time`);
    let cumulative = 0;
    let previousCpu: number | undefined;
    for (const entry of [...samples, fresh]) {
      cumulative += entry.messages;
      const rate = entry.seconds > 0 ? `${(entry.messages / entry.seconds).toFixed(0).padStart(5)} msg/s` : " ".repeat(11);
      const cpu = entry.messages > 0 && entry.cpuMs !== undefined && previousCpu !== undefined ? `   CPU ${((entry.cpuMs - previousCpu) / entry.messages).toFixed(2)} ms/msg` : "";
      previousCpu = entry.cpuMs;
      console.log(`  ${entry.label.padEnd(30)} ${String(cumulative).padStart(7)} msgs  ${rate}   VmRSS ${mib(entry.rssKiB)}, after GC ${mib(entry.rssAfterGcKiB)}${heap(entry.heapUsedBytes)}${cpu}`);
    }
    console.log(`  peak VmRSS (VmHWM) ${mib(peakKiB)}`);
    const ratio = (after: Sample, before: Sample) =>
      `VmRSS ${(after.rssKiB / before.rssKiB).toFixed(3)}, VmRSS after GC ${(after.rssAfterGcKiB / before.rssAfterGcKiB).toFixed(3)}` + (after.heapUsedBytes && before.heapUsedBytes ? `, JS heap after GC ${(after.heapUsedBytes / before.heapUsedBytes).toFixed(3)}` : "");
    console.log(`  ratio round ${ROUNDS} / round ${FIRST_AFTER_WARMUP + 1} (first after warm-up): ${ratio(last, first)}`);
    console.log(`  ratio after ${CHATS} new chats / round ${ROUNDS}: ${ratio(fresh, last)}`);
    if (SNAPSHOT_DIR) console.log(`  heap snapshots (one per sample, in order) in ${SNAPSHOT_DIR}`);
  } finally {
    inspector?.close();
    await server?.stop();
    await llm?.close().catch(() => undefined);
    await rm(root, { recursive: true, force: true });
  }
}
