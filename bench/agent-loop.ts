/**
 * Turns per second of the whole agent loop against a zero-latency in-process provider, beside
 * the same provider called bare. Three figures from one run:
 *   bare      the scripted model streamed in a loop (the ceiling)
 *   agent     Agent.respond: history load, context build, ReAct loop, history append (file store)
 *   bus       the same through the memory bus and TurnConsumer: publish → claim → turn → final → ack
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { createEmbeddedRuntime } from "../src/app/worker.js";
import type { OutboundMessage } from "../src/bus/message.js";
import { loadConfig } from "../src/config/load.js";
import type { ChatModel } from "../src/providers/chat-model.js";
import { scriptedModel } from "../tests/support/scripted-model.js";

const TURNS = Number(process.env.BENCH_TURNS ?? 2_000);
const SESSIONS = 100;

function model(): ChatModel {
  return scriptedModel(() => ({ text: ["The answer ", "is ", "42."] }));
}

async function bare(turns: number): Promise<number> {
  const provider = model();
  const started = performance.now();
  for (let index = 0; index < turns; index += 1) {
    for await (const part of provider.stream({ messages: [{ role: "user", content: `question ${index}` }] })) void part;
  }
  return turns / ((performance.now() - started) / 1000);
}

async function withRuntime<T>(run: (runtime: Awaited<ReturnType<typeof createEmbeddedRuntime>>) => Promise<T>): Promise<T> {
  const root = await mkdtemp(path.join(tmpdir(), "countbot-bench-"));
  const config = loadConfig({ env: { COUNTBOT_DATA_DIR: root }, cwd: root });
  const runtime = await createEmbeddedRuntime(config, pino({ level: "silent" }), { model: model() });
  try {
    return await run(runtime);
  } finally {
    await runtime.close();
    await rm(root, { recursive: true, force: true });
  }
}

async function agentDirect(turns: number): Promise<number> {
  return withRuntime(async (runtime) => {
    const started = performance.now();
    for (let index = 0; index < turns; index += 1) {
      await runtime.agent.respond({ sessionKey: `bench:${index % SESSIONS}`, channel: "bench", chatId: String(index % SESSIONS), content: `question ${index}`, messageIds: [`m${index}`] });
    }
    return turns / ((performance.now() - started) / 1000);
  });
}

async function throughBus(turns: number): Promise<{ messages: number; turns: number }> {
  return withRuntime(async (runtime) => {
    // A burst to one chat coalesces into one turn: count answered messages, not finals.
    let answered = 0;
    let finals = 0;
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    await runtime.bus.consumeOutbound("bench", async (event) => {
      if (event.type === "message" && (event.message as OutboundMessage).kind === "final") {
        finals += 1;
        answered += (event.message.metadata.answers as string[]).length;
        if (answered === turns) finished();
      }
    });
    const loop = runtime.run();
    const started = performance.now();
    for (let index = 0; index < turns; index += 1) {
      await runtime.bus.publishInbound({
        id: `m${index}`,
        channel: "bench",
        chatId: String(index % SESSIONS),
        senderId: "u",
        content: `question ${index}`,
        media: [],
        mentions: [],
        receivedAt: Date.now(),
        metadata: {},
      });
    }
    await done;
    const seconds = (performance.now() - started) / 1000;
    void loop;
    return { messages: turns / seconds, turns: finals / seconds };
  });
}

export async function benchAgentLoop(): Promise<void> {
  await agentDirect(200); // warm-up: JIT and file system caches
  const bareRate = await bare(TURNS * 5);
  const agentRate = await agentDirect(TURNS);
  const busRate = await throughBus(TURNS);
  console.log(`agent loop (${TURNS} turns over ${SESSIONS} sessions, zero-latency scripted model)`);
  console.log(`  bare provider calls/s      ${bareRate.toFixed(0)}`);
  console.log(`  Agent.respond turns/s      ${agentRate.toFixed(0)}   ratio to bare ${(agentRate / bareRate).toFixed(4)}`);
  console.log(`  bus + TurnConsumer turns/s    ${busRate.turns.toFixed(0)}   ratio to bare ${(busRate.turns / bareRate).toFixed(4)}`);
  console.log(`  bus + TurnConsumer messages/s ${busRate.messages.toFixed(0)}   (bursts to one chat coalesce into one turn)`);
}
