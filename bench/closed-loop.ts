/**
 * Closed loops through the web channel: each chat sends its next message only once the previous
 * one is answered, so no two messages of a chat ever coalesce into one turn (one message, one turn:
 * the per-message figures are the per-turn ones, the worst case for a bus). Used by `scale`'s
 * closed-loop rows and by the soak (`soak.ts`), which kills workers meanwhile.
 *
 * Checks what the bus guarantees: every message answered (a wait longer than `messageTimeoutMs`
 * counts it lost), none answered twice, a chat's answers in its sending order.
 */
import { performance } from "node:perf_hooks";
import type { Redis } from "ioredis";
import { Agent } from "undici";
import WebSocket from "ws";
import { commandDelta, executedCommands, executedMicros, scriptTimer } from "./redis-meter.js";

export interface ClosedLoopOptions {
  base: string;
  token: string;
  chatIds: string[];
  /** Stop sending once this many messages were sent in all, or once `durationMs` has passed. */
  messages?: number;
  durationMs?: number;
  /** A message not answered within this long is lost. */
  messageTimeoutMs: number;
  /** CPU ms used so far per labelled process. */
  meter?: () => Record<string, number>;
  /** Counts the commands Redis executed in the window (INFO commandstats), summed over a cluster's nodes. */
  redis?: Redis | Redis[];
  /** Runs once the window is measured, before the sockets close (closing 200 sockets is work of its own). */
  onMeasured?: () => Promise<void>;
  /** Told of each answered message: when it was sent (performance.now()) and how long it waited. */
  onAnswered?: (sentAt: number, waitedMs: number) => void;
}

export interface ClosedLoopResult {
  messages: number;
  seconds: number;
  perSecond: number;
  /** POST sent → its final received, ms. */
  latencies: number[];
  lost: number;
  duplicates: number;
  outOfOrder: number;
  /** The longest wait of any message, ms. */
  longestWaitMs: number;
  cpu: Record<string, number>;
  executed?: Record<string, number>;
  /** Microseconds Redis spent executing each command in the window (a script call's include its commands'). */
  executedMicros?: Record<string, number>;
  /** Redis's own CPU (used_cpu_sys + used_cpu_user from INFO), ms, in the window. */
  redisCpuMs?: number;
}

const loadGenerator = new Agent({ keepAliveTimeout: 30_000 });

export async function redisCpuMs(redis: Redis): Promise<number> {
  const info = await redis.info("cpu");
  const read = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(info)?.[1] ?? 0);
  return (read("used_cpu_sys") + read("used_cpu_user")) * 1000;
}

/** Redis's own CPU, ms, summed over the nodes. */
async function cpuOn(nodes: Redis[]): Promise<number> {
  return (await Promise.all(nodes.map(redisCpuMs))).reduce((sum, used) => sum + used, 0);
}

/** The commands the nodes executed (INFO commandstats), summed by command: calls, or with `read` the microseconds. */
async function executedOn(nodes: Redis[], read = executedCommands): Promise<Record<string, number>> {
  const summed: Record<string, number> = {};
  for (const counts of await Promise.all(nodes.map(read))) for (const [name, count] of Object.entries(counts)) summed[name] = (summed[name] ?? 0) + count;
  return summed;
}

export async function closedLoops(options: ClosedLoopOptions): Promise<ClosedLoopResult> {
  const { base, token, chatIds } = options;
  const waiting = new Map<string, { resolve: () => void; chatId: string }>();
  const answered = new Set<string>();
  /** Which chat sent each message, which chat each answer came on, and each chat's message in flight. */
  const sentBy = new Map<string, string>();
  const answeredOn = new Map<string, string>();
  const latest = new Map<string, string>();
  let duplicates = 0;
  let outOfOrder = 0;
  const sockets = await Promise.all(
    chatIds.map(async (chatId) => {
      const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=${chatId}`, { headers: { authorization: `Bearer ${token}` } });
      socket.on("message", (data) => {
        const event = JSON.parse(String(data)) as { type: string; answers?: string[] };
        if (event.type !== "message") return;
        for (const id of event.answers ?? []) {
          if (answered.has(id)) {
            duplicates += 1;
            continue;
          }
          answered.add(id);
          answeredOn.set(id, chatId);
          const waiter = waiting.get(id);
          // Answered on another chat, or an older message of this chat than the one in flight: out
          // of order. An id not sent yet as far as we know is an answer that beat its POST's 202.
          const sender = sentBy.get(id);
          if (sender !== undefined && (sender !== chatId || latest.get(chatId) !== id)) outOfOrder += 1;
          else waiter?.resolve();
        }
      });
      await new Promise<void>((resolve, reject) => {
        socket.once("open", () => resolve());
        socket.once("error", reject);
      });
      return socket;
    }),
  );

  const latencies: number[] = [];
  let sent = 0;
  let lost = 0;
  const limit = options.messages ?? Number.POSITIVE_INFINITY;
  try {
    const nodes = options.redis === undefined ? [] : [options.redis].flat();
    const executedBefore = nodes.length > 0 ? await executedOn(nodes) : undefined;
    const microsBefore = nodes.length > 0 ? await executedOn(nodes, executedMicros) : undefined;
    const scripts = process.env.BENCH_SCALE_SCRIPTS === "1" && nodes.length > 0 ? scriptTimer(nodes) : undefined;
    await scripts?.start();
    const redisCpuBefore = nodes.length > 0 ? await cpuOn(nodes) : undefined;
    const cpuBefore = options.meter?.() ?? {};
    const startedAt = performance.now();
    const endsAt = startedAt + (options.durationMs ?? Number.POSITIVE_INFINITY);
    await Promise.all(
      chatIds.map(async (chatId, chatIndex) => {
        for (let message = 0; sent < limit && performance.now() < endsAt; message += 1) {
          sent += 1;
          const sendStart = performance.now();
          const response = await loadGenerator.request({
            origin: new URL(base).origin,
            path: `/api/chat/${chatId}/messages`,
            method: "POST",
            headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
            body: JSON.stringify({ content: `chat ${chatIndex} message ${message}` }),
          });
          if (response.statusCode !== 202) throw new Error(`POST to ${chatId} answered ${response.statusCode}: ${await response.body.text()}`);
          const { id } = (await response.body.json()) as { id: string };
          sentBy.set(id, chatId);
          latest.set(chatId, id);
          if (answered.has(id)) {
            if (answeredOn.get(id) !== chatId) outOfOrder += 1;
            latencies.push(performance.now() - sendStart);
            options.onAnswered?.(sendStart, performance.now() - sendStart);
            continue;
          }
          let timer: NodeJS.Timeout | undefined;
          const outcome = await new Promise<"answered" | "lost">((resolve) => {
            waiting.set(id, { chatId, resolve: () => resolve("answered") });
            timer = setTimeout(() => resolve("lost"), options.messageTimeoutMs);
          });
          clearTimeout(timer);
          waiting.delete(id);
          if (outcome === "lost") lost += 1;
          latencies.push(performance.now() - sendStart);
          options.onAnswered?.(sendStart, performance.now() - sendStart);
        }
      }),
    );
    const seconds = (performance.now() - startedAt) / 1000;
    const cpuAfter = options.meter?.() ?? {};
    const cpu = Object.fromEntries(Object.entries(cpuAfter).map(([label, used]) => [label, used - (cpuBefore[label] ?? 0)]));
    const executed = executedBefore ? commandDelta(executedBefore, await executedOn(nodes)) : undefined;
    const micros = microsBefore ? commandDelta(microsBefore, await executedOn(nodes, executedMicros)) : undefined;
    if (scripts) {
      const times = Object.entries(await scripts.read()).sort((a, b) => b[1].micros - a[1].micros);
      const per = latencies.length;
      console.log(`  Redis time per message by script and command (slow log at 0; µs/msg, calls/msg, µs/call): ${times.slice(0, 16).map(([name, time]) => `${name} ${(time.micros / per).toFixed(1)} (${(time.calls / per).toFixed(2)}, ${(time.micros / time.calls).toFixed(0)})`).join("; ")}`);
    }
    const redisCpu = redisCpuBefore !== undefined ? (await cpuOn(nodes)) - redisCpuBefore : undefined;
    await options.onMeasured?.();
    return {
      messages: latencies.length,
      seconds,
      perSecond: latencies.length / seconds,
      latencies,
      lost,
      duplicates,
      outOfOrder,
      // Not Math.max(...latencies): a minute of fast loops is more arguments than the stack holds.
      longestWaitMs: latencies.reduce((longest, latency) => Math.max(longest, latency), 0),
      cpu,
      executed,
      executedMicros: micros,
      redisCpuMs: redisCpu,
    };
  } finally {
    for (const socket of sockets) socket.terminate();
  }
}
