/**
 * Delivery of one channel's outbound stream through a consumer group. Entries are handled one at
 * a time in stream order; a failed final is retried in place (so a chat's replies stay in order)
 * and stays pending until it is delivered; entries left pending by a dead consumer are claimed
 * (XAUTOCLAIM) once they have been idle long enough. Drafts carry only the reply id: the newest
 * text is read from its key at delivery time, and drafts of a delivered reply are skipped.
 *
 * A read whose answer dies with the connection leaves its entries pending to this very consumer
 * (Redis delivered them; we never saw them), and ioredis's replay of the read asks only for new
 * ones. So after every reconnect, and after any failed round, the consumer first reads its own
 * pending entries (XREADGROUP from id 0) instead of leaving them to the reclaim a minute later.
 * A failover to a replica the group had not reached (replication is asynchronous) makes every
 * read fail with NOGROUP: the group is created again.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import { sleep } from "../sleep.js";
import { KeyedLanes } from "./chat-lane.js";
import type { OutboundMessage } from "./message.js";
import type { BusKeys } from "./redis-keys.js";
import type { Draft, OutboundEvent, OutboundHandler, Subscription } from "./message-bus.js";

export const DELIVERY_GROUP = "delivery";
const MAX_IN_FLIGHT = 1_000;
const ackDelivered = loadScript(new URL("./lua/", import.meta.url), "ack-delivered-1.lua");
/** How long a finished marker keeps drafts of a delivered reply from being shown. */
const FINISHED_TTL_MS = 10 * 60_000;

/**
 * What travels in the stream: a whole final/notice, or a pointer to a draft's newest text. A final
 * whose reply had drafts published says so (`drafted`): only then does its delivery leave a
 * finished marker for other consumers (drafts of a reply without any need none).
 */
export type StreamEvent = { type: "message"; message: OutboundMessage; drafted?: true } | { type: "draft"; draft: Omit<Draft, "text"> };

export interface OutboundConsumerOptions {
  redis: RedisClient;
  /** A dedicated connection for the blocking reads. */
  blocking: RedisClient;
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
  const createGroup = async () => {
    try {
      await redis.xgroup("CREATE", stream, DELIVERY_GROUP, "0", "MKSTREAM");
    } catch (error) {
      if (!(error instanceof Error) || !error.message.includes("BUSYGROUP")) throw error;
    }
  };
  await createGroup();
  const consumer = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  let closed = false;
  /** Finals handled recently, so drafts behind them in the same batch are skipped without a lookup. */
  const finished = new Set<string>();

  /** Hands one entry to the handler; false when closing interrupted a final's delivery. */
  const deliver = async (entry: Entry): Promise<boolean> => {
    const [, fields] = entry;
    const raw = fields[fields.indexOf("event") + 1];
    const event = raw ? (JSON.parse(raw) as StreamEvent) : undefined;
    let failures = 0;
    while (event && !closed) {
      try {
        const resolved = await resolve(redis, keys, event, finished);
        if (resolved) await options.handler(resolved);
        if (event.type === "message" && event.message.kind === "final") {
          finished.add(event.message.id);
          if (finished.size > 10_000) finished.delete(finished.values().next().value!);
        }
        return true;
      } catch (error) {
        options.onError?.(error);
        if (event.type === "draft") return true;
        failures += 1;
        await sleep(Math.min(options.redeliveryDelayMs * 2 ** (failures - 1), 30_000));
      }
    }
    // Closing mid-retry leaves the final pending: another consumer takes it over.
    return !(closed && event?.type === "message");
  };

  // One lane per chat: a chat's entries are delivered in stream order, chats concurrently. Each entry
  // is acknowledged once delivered, so a slow chat holds up neither other chats nor the reads.
  const lanes = new KeyedLanes();
  const inFlight = new Set<string>();
  let acks: Array<{ id: string; final?: string }> = [];
  let laneFinished: (() => void) | undefined;

  const flushAcks = async () => {
    if (acks.length === 0) return;
    const batch = acks;
    acks = [];
    const ids = batch.map((ack) => ack.id);
    const finals = batch.flatMap((ack) => (ack.final ? [ack.final] : []));
    // One round trip per batch: XACK, XDEL and the finished markers in one script.
    await runScript(redis, ackDelivered, [stream], [DELIVERY_GROUP, keys.finishedPrefix, FINISHED_TTL_MS, ids.length, ...ids, ...finals]);
  };

  const enqueue = (entry: Entry) => {
    if (!entry || inFlight.has(entry[0]) || acks.some((ack) => ack.id === entry[0])) return;
    // An entry trimmed from the stream while pending comes back without fields: nothing to deliver.
    if (!entry[1]) {
      acks.push({ id: entry[0] });
      return;
    }
    const raw = entry[1][entry[1].indexOf("event") + 1];
    const event = raw ? (JSON.parse(raw) as StreamEvent) : undefined;
    const chat = event?.type === "message" ? event.message.chatId : event?.type === "draft" ? event.draft.chatId : "";
    inFlight.add(entry[0]);
    void lanes.run(chat, async () => {
      try {
        if (closed || !(await deliver(entry))) return;
        acks.push({ id: entry[0], final: event?.type === "message" && event.message.kind === "final" && event.drafted ? event.message.id : undefined });
      } catch (error) {
        options.onError?.(error);
      } finally {
        inFlight.delete(entry[0]);
        laneFinished?.();
      }
    });
  };

  // Set on every (re)connect of the reading connection and after a failed round.
  let readOwnPending = true;
  options.blocking.on("ready", () => {
    readOwnPending = true;
  });

  // Entries a dead consumer left pending are looked for now and then, not on every read: they are
  // taken over only once idle for reclaimIdleMs anyway.
  const reclaimEveryMs = Math.min(options.reclaimIdleMs / 4, 15_000);
  let reclaimedAt = Number.NEGATIVE_INFINITY;

  const run = async () => {
    while (!closed) {
      try {
        // Bounded memory: at most MAX_IN_FLIGHT entries between read and acknowledgement.
        while (inFlight.size >= MAX_IN_FLIGHT && !closed) await new Promise<void>((resolve) => (laneFinished = resolve));
        if (readOwnPending) {
          readOwnPending = false;
          const own = (await options.blocking.xreadgroup("GROUP", DELIVERY_GROUP, consumer, "COUNT", 1000, "BLOCK", 1, "STREAMS", stream, "0")) as Array<[string, Entry[]]> | null;
          for (const [, entries] of own ?? []) {
            for (const entry of entries) enqueue(entry);
            if (entries.length >= 1000) readOwnPending = true;
          }
        }
        if (Date.now() - reclaimedAt >= reclaimEveryMs) {
          reclaimedAt = Date.now();
          const reclaimed = (await redis.xautoclaim(stream, DELIVERY_GROUP, consumer, options.reclaimIdleMs, "0-0", "COUNT", 100)) as [string, Entry[]];
          for (const entry of reclaimed[1]) enqueue(entry);
          // A full page: there may be more, look again on the next round.
          if (reclaimed[1].length >= 100) reclaimedAt = Number.NEGATIVE_INFINITY;
        }
        const result = (await options.blocking.xreadgroup("GROUP", DELIVERY_GROUP, consumer, "COUNT", 100, "BLOCK", 1000, "STREAMS", stream, ">")) as
          | Array<[string, Entry[]]>
          | null;
        for (const [, entries] of result ?? []) for (const entry of entries) enqueue(entry);
        // Give lanes that can finish at once (most of them) a turn, then acknowledge in one round trip.
        await new Promise((resolve) => setImmediate(resolve));
        await flushAcks();
      } catch (error) {
        if (closed) break;
        readOwnPending = true;
        options.onError?.(error);
        // A failover to a replica the stream had not reached yet: the group is created again, from
        // the stream's start (delivered entries were deleted; the finished markers skip any twice).
        if (error instanceof Error && error.message.startsWith("NOGROUP")) await createGroup().catch((failure: unknown) => options.onError?.(failure));
        await sleep(500);
      }
    }
  };
  const running = run();

  return {
    async close() {
      closed = true;
      laneFinished?.();
      options.blocking.disconnect();
      await running;
      await lanes.idle();
      await flushAcks().catch((error: unknown) => options.onError?.(error));
    },
  };
}

async function resolve(redis: RedisClient, keys: BusKeys, event: StreamEvent, finished: Set<string>): Promise<OutboundEvent | undefined> {
  if (event.type === "message") return event;
  if (finished.has(event.draft.replyId)) return undefined;
  const [text, delivered] = await redis.mget(keys.draft(event.draft.replyId), keys.finished(event.draft.replyId));
  if (text === null || text === undefined || (delivered !== null && delivered !== undefined)) return undefined;
  return { type: "draft", draft: { ...event.draft, text } };
}
