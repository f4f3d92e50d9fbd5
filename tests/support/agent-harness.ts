/**
 * Builds an embedded runtime (memory bus, file store, temp workspace) around a scripted model,
 * and records what the agent sends out, for loop-level tests.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { type EmbeddedRuntime, createEmbeddedRuntime } from "../../src/app/worker.js";
import type { InboundMessage, OutboundMessage } from "../../src/bus/message.js";
import { parseCommand } from "../../src/bus/commands.js";
import type { Draft, Subscription } from "../../src/bus/message-bus.js";
import { loadConfig } from "../../src/config/load.js";
import type { Metrics } from "../../src/metrics.js";
import type { ChatModel } from "../../src/providers/chat-model.js";

export interface Harness {
  runtime: EmbeddedRuntime;
  root: string;
  finals: OutboundMessage[];
  notices: OutboundMessage[];
  drafts: Draft[];
  send(chatId: string, content: string, extra?: Partial<InboundMessage>): Promise<InboundMessage>;
  waitForFinals(count: number): Promise<OutboundMessage[]>;
  close(): Promise<void>;
}

let sequence = 0;

export interface HarnessOptions {
  env?: Record<string, string>;
  /** Written as the config file. */
  config?: Record<string, unknown>;
  channel?: string;
  /** Declare every chat's drafts watched (a streaming connector would). Default true. */
  watchDrafts?: boolean;
  /** The runtime's clock (the system prompt's time, history timestamps). */
  now?: () => number;
  /** Where the runtime counts (model calls, tokens). */
  metrics?: Metrics;
}

/** `model` undefined: the runtime builds the model from the config, as in production. */
export async function startHarness(model: ChatModel | undefined, options: HarnessOptions = {}): Promise<Harness> {
  const channel = options.channel ?? "test";
  const root = await mkdtemp(path.join(tmpdir(), "countbot-harness-"));
  const file = path.join(root, "countbot.json");
  await writeFile(file, JSON.stringify(options.config ?? {}));
  const config = loadConfig({ env: { COUNTBOT_DATA_DIR: path.join(root, "data"), ...options.env }, cwd: root, file });
  const runtime = await createEmbeddedRuntime(config, pino({ level: "silent" }), {
    ...(model ? { model } : {}),
    ...(options.now ? { now: options.now } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
  });
  const finals: OutboundMessage[] = [];
  const notices: OutboundMessage[] = [];
  const drafts: Draft[] = [];
  // The harness watches every chat's drafts, as a connector of a streaming platform would.
  if (options.watchDrafts ?? true) await runtime.bus.watchDrafts(channel);
  const subscription: Subscription = await runtime.bus.consumeOutbound(channel, async (event) => {
    if (event.type === "draft") drafts.push(event.draft);
    else if (event.message.kind === "notice") notices.push(event.message);
    else finals.push(event.message);
  });
  const loop = runtime.run();
  return {
    runtime,
    root,
    finals,
    notices,
    drafts,
    async send(chatId, content, extra = {}) {
      sequence += 1;
      const message: InboundMessage = {
        id: `m${sequence}`,
        channel,
        chatId,
        senderId: "user-1",
        content,
        media: [],
        mentions: [],
        receivedAt: Date.now(),
        metadata: {},
        // What admission does at a gateway: the command parsed once, carried on the message.
        ...(parseCommand(content) === undefined ? {} : { command: parseCommand(content) }),
        ...extra,
      };
      await runtime.bus.publishInbound(message);
      return message;
    },
    async waitForFinals(count) {
      const deadline = Date.now() + 10_000;
      while (finals.length < count) {
        if (Date.now() > deadline) throw new Error(`expected ${count} final replies, got ${finals.length}: ${JSON.stringify(finals.map((final) => final.content))}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return finals.slice(0, count);
    },
    async close() {
      await subscription.close();
      await runtime.close();
      await loop;
      await rm(root, { recursive: true, force: true });
    },
  };
}

/** A promise with its resolver outside, to hold a scripted step until the test lets it go. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
