/**
 * Bus throughput: messages/s through publish → claim → fenced outbound publish → ack → delivered,
 * for the memory bus and the Redis bus, beside redis-benchmark's SET rate on the same machine and
 * the Redis commands the design spends per message (which bounds what it can reach).
 */
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { createMemoryBus } from "../src/bus/memory-bus.js";
import type { InboundMessage } from "../src/bus/message.js";
import { createRedisBus } from "../src/bus/redis-bus.js";
import type { MessageBus } from "../src/bus/message-bus.js";
import { deleteKeys, redisUrl } from "../tests/support/redis.js";

const MESSAGES = Number(process.env.BENCH_BUS_MESSAGES ?? 20_000);
const WORKERS = 16;

function message(index: number): InboundMessage {
  // One message per session: no coalescing flatters the figure.
  return { id: `m${index}`, channel: "bench", chatId: `c${index}`, senderId: "u", content: "hello", media: [], mentions: [], receivedAt: Date.now(), metadata: {} };
}

async function run(bus: MessageBus): Promise<number> {
  let delivered = 0;
  let finished!: () => void;
  const done = new Promise<void>((resolve) => (finished = resolve));
  const subscription = await bus.consumeOutbound("bench", async (event) => {
    if (event.type !== "message") return;
    if (!(await bus.markDelivered(event.message.id))) return;
    delivered += 1;
    if (delivered === MESSAGES) finished();
  });
  const started = performance.now();
  const publishing = (async () => {
    for (let index = 0; index < MESSAGES; index += 1) await bus.publishInbound(message(index));
  })();
  let processed = 0;
  const worker = async () => {
    while (processed < MESSAGES) {
      const claim = await bus.claimSession({ timeoutMs: 200 });
      if (!claim) continue;
      processed += claim.messages.length;
      const first = claim.messages[0]!;
      // The reply goes out with the ack, as a turn's does.
      await bus.ack(claim, claim.messages.length, { id: `${first.id}:0`, channel: "bench", chatId: first.chatId, content: "hi", kind: "final", media: [], metadata: {} });
    }
  };
  await Promise.all([publishing, ...Array.from({ length: WORKERS }, worker)]);
  await done;
  const seconds = (performance.now() - started) / 1000;
  await subscription.close();
  return MESSAGES / seconds;
}

function redisBenchmarkSetRate(): number | undefined {
  try {
    const url = new URL(redisUrl);
    const output = execFileSync("redis-benchmark", ["-h", url.hostname, "-p", url.port || "6379", "-q", "-n", "100000", "-t", "set"], { encoding: "utf8" });
    const match = /SET: ([\d.]+) requests per second/.exec(output.split("\r").join("\n"));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Counts the commands every ioredis connection sends: round trips, with a script counting once. */
function countRoundTrips(): { count: () => number; stop: () => void } {
  const prototype = Redis.prototype as unknown as { sendCommand: (...args: unknown[]) => unknown };
  const original = prototype.sendCommand;
  let sent = 0;
  prototype.sendCommand = function (this: unknown, ...args: unknown[]) {
    sent += 1;
    return original.apply(this, args);
  };
  return { count: () => sent, stop: () => void (prototype.sendCommand = original) };
}

export async function benchBus(): Promise<void> {
  const memoryRate = await run(createMemoryBus());

  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const prefix = `countbot-bench-${randomUUID()}`;
  const bus = createRedisBus({ redis, prefix });
  const counter = countRoundTrips();
  const redisRate = await run(bus);
  const commands = counter.count();
  counter.stop();
  await bus.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  const setRate = redisBenchmarkSetRate();
  const perMessage = commands / MESSAGES;

  console.log(`bus throughput (${MESSAGES} messages, one per chat, ${WORKERS} concurrent claimers, one process)`);
  console.log(`  memory bus                 ${memoryRate.toFixed(0)} messages/s`);
  console.log(`  redis bus                  ${redisRate.toFixed(0)} messages/s   ratio to memory ${(redisRate / memoryRate).toFixed(3)}`);
  console.log(
    `  redis round trips/message  ${perMessage.toFixed(2)} (commands sent by the clients of the bus alone: publish, claim, reply + ack, delivery and its dedupe; a Lua script counts once; the whole path of a real turn is counted by \`scale\`)`,
  );
  if (setRate) {
    console.log(`  redis-benchmark SET        ${setRate.toFixed(0)} requests/s (50 clients)`);
    console.log(`  design ceiling             ${(setRate / perMessage).toFixed(0)} messages/s = SET rate / commands per message; achieved ${((redisRate / (setRate / perMessage)) * 100).toFixed(0)}% of it`);
  }
}
