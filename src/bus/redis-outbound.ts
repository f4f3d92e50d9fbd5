/**
 * Delivery of one channel's outbound stream through a consumer group. Entries are handled one at
 * a time in stream order; a failed final is retried in place (so a chat's replies stay in order)
 * and stays pending until it is delivered; entries left pending by a dead consumer are claimed
 * (XAUTOCLAIM) once they have been idle long enough. Drafts carry only the reply id: the newest
 * text is read from its key at delivery time, and drafts of a delivered reply are skipped.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Redis } from "ioredis";
import type { OutboundMessage } from "./message.js";
import type { BusKeys } from "./redis-keys.js";
import type { Draft, OutboundEvent, OutboundHandler, Subscription } from "./types.js";

export const DELIVERY_GROUP = "delivery";

/** What travels in the stream: a whole final/notice, or a pointer to a draft's newest text. */
export type StreamEvent = { type: "message"; message: OutboundMessage } | { type: "draft"; draft: Omit<Draft, "text"> };

export interface OutboundConsumerOptions {
  redis: Redis;
  /** A dedicated connection for the blocking reads. */
  blocking: Redis;
  keys: BusKeys;
  channel: string;
  handler: OutboundHandler;
  /** Entries idle this long in another consumer's pending list are taken over. */
  reclaimIdleMs: number;
  redeliveryDelayMs: number;
  onError?: (error: unknown) => void;
}

type Entry = [id: string, fields: string[]];

export async function startOutboundConsumer(options: OutboundConsumerOptions): Promise<Subscription> {
  const { redis, keys, channel } = options;
  const stream = keys.outbound(channel);
  try {
    await redis.xgroup("CREATE", stream, DELIVERY_GROUP, "0", "MKSTREAM");
  } catch (error) {
    if (!(error instanceof Error) || !error.message.includes("BUSYGROUP")) throw error;
  }
  const consumer = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  let closed = false;

  const deliver = async (entry: Entry): Promise<void> => {
    const [id, fields] = entry;
    const raw = fields[fields.indexOf("event") + 1];
    const event = raw ? (JSON.parse(raw) as StreamEvent) : undefined;
    let failures = 0;
    while (event && !closed) {
      try {
        const resolved = await resolve(redis, keys, event);
        if (resolved) await options.handler(resolved);
        if (event.type === "message" && event.message.kind === "final") {
          await redis.set(keys.finished(event.message.id), "1", "PX", 10 * 60_000);
        }
        break;
      } catch (error) {
        options.onError?.(error);
        if (event.type === "draft") break;
        failures += 1;
        await new Promise((done) => setTimeout(done, Math.min(options.redeliveryDelayMs * 2 ** (failures - 1), 30_000)));
      }
    }
    // Closing mid-retry leaves the entry pending: another consumer takes it over.
    if (closed && event?.type === "message") return;
    await redis.multi().xack(stream, DELIVERY_GROUP, id).xdel(stream, id).exec();
  };

  const run = async () => {
    while (!closed) {
      try {
        const reclaimed = (await redis.xautoclaim(stream, DELIVERY_GROUP, consumer, options.reclaimIdleMs, "0-0", "COUNT", 100)) as [string, Entry[]];
        for (const entry of reclaimed[1]) if (!closed && entry) await deliver(entry);
        const result = (await options.blocking.xreadgroup("GROUP", DELIVERY_GROUP, consumer, "COUNT", 100, "BLOCK", 1000, "STREAMS", stream, ">")) as
          | Array<[string, Entry[]]>
          | null;
        for (const [, entries] of result ?? []) for (const entry of entries) if (!closed) await deliver(entry);
      } catch (error) {
        if (closed) break;
        options.onError?.(error);
        await new Promise((done) => setTimeout(done, 500));
      }
    }
  };
  const running = run();

  return {
    async close() {
      closed = true;
      options.blocking.disconnect();
      await running;
    },
  };
}

async function resolve(redis: Redis, keys: BusKeys, event: StreamEvent): Promise<OutboundEvent | undefined> {
  if (event.type === "message") return event;
  const [text, finished] = await Promise.all([redis.get(keys.draft(event.draft.replyId)), redis.exists(keys.finished(event.draft.replyId))]);
  if (text === null || finished === 1) return undefined;
  return { type: "draft", draft: { ...event.draft, text } };
}
