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
import { BusError } from "../errors.js";
import { KeyedLanes } from "./chat-lane.js";
import { type StreamEvent, parseStreamEvent } from "./payloads.js";
import type { BusKeys } from "./redis-keys.js";
import type { OutboundEvent, OutboundHandler, Subscription } from "./message-bus.js";
import { forgetOldest } from "../bounded.js";

export const DELIVERY_GROUP = "delivery";
const MAX_IN_FLIGHT = 1_000;
const ackDelivered = loadScript(new URL("./lua/", import.meta.url), "ack-delivered-1.lua");
/** How long a finished marker keeps drafts of a delivered reply from being shown. */
const FINISHED_TTL_MS = 10 * 60_000;

export type { StreamEvent } from "./payloads.js";

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
  const consumer = new OutboundConsumer(options);
  await consumer.createGroup();
  return consumer.start();
}

/** One consumer of one channel's stream: reads, hands entries to per-chat lanes, acknowledges in batches. */
class OutboundConsumer {
  private readonly stream: string;
  private readonly name = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  private closed = false;
  /** Finals handled recently, so drafts behind them in the same batch are skipped without a lookup. */
  private readonly finished = new Set<string>();
  // One lane per chat: a chat's entries are delivered in stream order, chats concurrently. Each entry
  // is acknowledged once delivered, so a slow chat holds up neither other chats nor the reads.
  private readonly lanes = new KeyedLanes();
  /** Replies (not drafts) queued in each chat's lane and not yet handed over: the chats' backlogs. */
  private readonly queuedReplies = new Map<string, number>();
  private readonly inFlight = new Set<string>();
  private acks: Array<{ id: string; final?: string }> = [];
  private laneFinished: (() => void) | undefined;
  /** Set on every (re)connect of the reading connection and after a failed round. */
  private readOwnPending = true;
  // Entries a dead consumer left pending are looked for now and then, not on every read: they are
  // taken over only once idle for reclaimIdleMs anyway.
  private readonly reclaimEveryMs: number;
  private reclaimedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: OutboundConsumerOptions) {
    this.stream = options.keys.outbound(options.channel);
    this.reclaimEveryMs = Math.min(options.reclaimIdleMs / 4, 15_000);
    options.blocking.on("ready", () => {
      this.readOwnPending = true;
    });
  }

  async createGroup(): Promise<void> {
    try {
      await this.options.redis.xgroup("CREATE", this.stream, DELIVERY_GROUP, "0", "MKSTREAM");
    } catch (error) {
      if (!(error instanceof Error) || !error.message.includes("BUSYGROUP")) throw error;
    }
  }

  start(): Subscription {
    const running = this.run();
    return {
      close: async () => {
        this.closed = true;
        this.laneFinished?.();
        this.options.blocking.disconnect();
        // Bounded: a cluster client may put a read that its disconnect interrupted back in its
        // queue, where it waits for a connection that never comes. Closed, the loop does nothing
        // with whatever that read might still bring.
        await settledWithin(running, CLOSE_READ_WAIT_MS);
        await this.lanes.idle();
        await this.flushAcks().catch((error: unknown) => this.options.onError?.(error));
      },
    };
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      try {
        await this.round();
      } catch (error) {
        if (this.closed) break;
        this.readOwnPending = true;
        this.options.onError?.(error);
        // A failover to a replica the stream had not reached yet: the group is created again, from
        // the stream's start (delivered entries were deleted; the finished markers skip any twice).
        if (error instanceof Error && error.message.startsWith("NOGROUP")) await this.createGroup().catch((failure: unknown) => this.options.onError?.(failure));
        await sleep(500);
      }
    }
  }

  /** One read: own pending entries first when due, dead consumers' now and then, then new ones; then the acks. */
  private async round(): Promise<void> {
    const { redis, blocking, reclaimIdleMs } = this.options;
    // Bounded memory: at most MAX_IN_FLIGHT entries between read and acknowledgement.
    while (this.inFlight.size >= MAX_IN_FLIGHT && !this.closed) await new Promise<void>((resolve) => (this.laneFinished = resolve));
    if (this.readOwnPending) {
      this.readOwnPending = false;
      const own = (await blocking.xreadgroup("GROUP", DELIVERY_GROUP, this.name, "COUNT", 1000, "BLOCK", 1, "STREAMS", this.stream, "0")) as Array<[string, Entry[]]> | null;
      for (const [, entries] of own ?? []) {
        for (const entry of entries) this.enqueue(entry);
        if (entries.length >= 1000) this.readOwnPending = true;
      }
    }
    if (Date.now() - this.reclaimedAt >= this.reclaimEveryMs) {
      this.reclaimedAt = Date.now();
      const reclaimed = (await redis.xautoclaim(this.stream, DELIVERY_GROUP, this.name, reclaimIdleMs, "0-0", "COUNT", 100)) as [string, Entry[]];
      for (const entry of reclaimed[1]) this.enqueue(entry);
      // A full page: there may be more, look again on the next round.
      if (reclaimed[1].length >= 100) this.reclaimedAt = Number.NEGATIVE_INFINITY;
    }
    const result = (await blocking.xreadgroup("GROUP", DELIVERY_GROUP, this.name, "COUNT", 100, "BLOCK", 1000, "STREAMS", this.stream, ">")) as Array<[string, Entry[]]> | null;
    for (const [, entries] of result ?? []) for (const entry of entries) this.enqueue(entry);
    // Give lanes that can finish at once (most of them) a turn, then acknowledge in one round trip.
    await new Promise((resolve) => setImmediate(resolve));
    await this.flushAcks();
  }

  private enqueue(entry: Entry): void {
    if (!entry || this.inFlight.has(entry[0]) || this.acks.some((ack) => ack.id === entry[0])) return;
    // An entry trimmed from the stream while pending comes back without fields: nothing to deliver.
    if (!entry[1]) {
      this.acks.push({ id: entry[0] });
      return;
    }
    const event = eventOf(entry, this.options.onError);
    const chat = event?.type === "message" ? event.message.chatId : event?.type === "draft" ? event.draft.chatId : "";
    this.inFlight.add(entry[0]);
    const reply = event?.type === "message";
    if (reply) this.queuedReplies.set(chat, (this.queuedReplies.get(chat) ?? 0) + 1);
    void this.lanes.run(chat, async () => {
      let behind = 0;
      if (reply) {
        behind = this.queuedReplies.get(chat)! - 1;
        if (behind === 0) this.queuedReplies.delete(chat);
        else this.queuedReplies.set(chat, behind);
      }
      try {
        if (this.closed || !(await this.deliver(event, behind, publishedAt(entry[0])))) return;
        this.acks.push({ id: entry[0], final: event?.type === "message" && event.message.kind === "final" && event.drafted ? event.message.id : undefined });
      } catch (error) {
        this.options.onError?.(error);
      } finally {
        this.inFlight.delete(entry[0]);
        this.laneFinished?.();
      }
    });
  }

  /** Hands one event to the handler; false when closing interrupted a final's delivery. */
  private async deliver(event: StreamEvent | undefined, behind: number, publishedAt: number): Promise<boolean> {
    let failures = 0;
    while (event && !this.closed) {
      try {
        const resolved = await resolve(this.options.redis, this.options.keys, event, this.finished);
        if (resolved) await this.options.handler(resolved, { behind, publishedAt });
        if (event.type === "message" && event.message.kind === "final") {
          this.finished.add(event.message.id);
          forgetOldest(this.finished, 10_000);
        }
        return true;
      } catch (error) {
        this.options.onError?.(error);
        if (event.type === "draft") return true;
        failures += 1;
        await sleep(Math.min(this.options.redeliveryDelayMs * 2 ** (failures - 1), 30_000));
      }
    }
    // Closing mid-retry leaves the final pending: another consumer takes it over.
    return !(this.closed && event?.type === "message");
  }

  private async flushAcks(): Promise<void> {
    if (this.acks.length === 0) return;
    const batch = this.acks;
    this.acks = [];
    const ids = batch.map((ack) => ack.id);
    const finals = batch.flatMap((ack) => (ack.final ? [ack.final] : []));
    // One round trip per batch: XACK, XDEL and the finished markers in one script.
    await runScript(this.options.redis, ackDelivered, [this.stream], [DELIVERY_GROUP, this.options.keys.finishedPrefix, FINISHED_TTL_MS, ids.length, ...ids, ...finals]);
  }
}

/** The entry's event as the model reads it; a payload that does not parse is reported and delivers nothing (payloads.ts). */
function eventOf(entry: Entry, onError?: (error: unknown) => void): StreamEvent | undefined {
  const raw = entry[1][entry[1].indexOf("event") + 1];
  if (!raw) return undefined;
  const parsed = parseStreamEvent(raw);
  if (parsed.ok) return parsed.value;
  onError?.(new BusError(`outbound entry ${entry[0]} refused: ${parsed.problem}`, "invalid"));
  return undefined;
}

async function resolve(redis: RedisClient, keys: BusKeys, event: StreamEvent, finished: Set<string>): Promise<OutboundEvent | undefined> {
  if (event.type === "message") return event;
  if (finished.has(event.draft.replyId)) return undefined;
  const [text, delivered] = await redis.mget(keys.draft(event.draft.replyId), keys.finished(event.draft.replyId));
  if (text === null || text === undefined || (delivered !== null && delivered !== undefined)) return undefined;
  return { type: "draft", draft: { ...event.draft, text } };
}

/**
 * When a stream entry was added, from its id (`<ms>-<sequence>`): the sequence orders entries of
 * one millisecond, in thousandths (a double near 1.8e12 holds no finer fraction than 1/4096).
 */
function publishedAt(id: string): number {
  const [ms, sequence] = id.split("-");
  return Number(ms) + Math.min(Number(sequence ?? 0), 999) / 1_000;
}

/** How long closing waits for the read in flight to end. */
const CLOSE_READ_WAIT_MS = 2_000;

/** Resolves when `promise` settles or `ms` pass, whichever is first. */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise.catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
