/**
 * The Redis MessageBus: mailbox per session + ready set + fenced lease, as DESIGN.md describes.
 * Every state change that must be atomic is a Lua script in ./lua.
 *
 * Redis dying mid-flight: ioredis queues commands while the connection is down and resends those
 * whose reply died with it, so every command here is safe to arrive twice or late:
 * - time: the scripts take Redis's own clock (TIME) unless a clock was injected (the conformance
 *   suite drives time by hand), so a lease is never judged with the time a command was queued;
 * - publish: the dedupe marker holds the message id, so a replayed publish finds itself (accepted,
 *   queued once), with or without a platform event id;
 * - claim: each call carries a claim id, so a replayed claim hands back the same lease;
 * - ack: a `done:<call id>` marker per batch of acks holding its reply, so a replayed batch gets it
 *   back (redis-acks.ts); dead letter: a `done:<token>` marker, so a replayed one succeeds;
 * - fenced publish: a `published:<token>:<id>` marker, so a replay adds no second entry;
 * - delivery mark: holds a token of its own call, so a replayed mark is still ours to send
 *   (redis-delivery-marks.ts);
 * - outbound reads: after a reconnect the consumer reads its own pending entries first;
 * - inbound publish fails fast (BusError "unavailable") while Redis is away, so a message is
 *   accepted only once Redis has it.
 */
import { randomUUID } from "node:crypto";
import type { RedisClient } from "../redis/client.js";
import { withTraceCarrier } from "../tracing.js";
import { BusError } from "../errors.js";
import { runScript, loadScript } from "../redis/scripts.js";
import { type InboundMessage, type OutboundMessage, sessionKeyOf } from "./message.js";
import { type BusKeys, busKeys } from "./redis-keys.js";
import { type ReplicaWait, replicaWait } from "./replica-wait.js";
import { WorkerLiveness } from "./worker-liveness.js";
import { RedisDrafts } from "./redis-drafts.js";
import { DeliveryMarks } from "./redis-delivery-marks.js";
import { RedisSignals } from "./redis-signals.js";
import { startOutboundConsumer } from "./redis-outbound.js";
import { RedisClaims } from "./redis-claims.js";
import { type HistoryKeys, RedisAcks } from "./redis-acks.js";
import { RedisInbox, confirmedWithin, mailboxJson, unavailable } from "./redis-inbox.js";
import { busStats, readDeadLetters } from "./redis-bus-ops.js";
import {
  type BusStats,
  type BusOptions,
  type Claim,
  type ClaimOptions,
  type DeadLetter,
  type Draft,
  type MessageBus,
  type OutboundHandler,
  type PublishResult,
  type Subscription,
} from "./message-bus.js";

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  enqueueMany: loadScript(scriptsDirectory, "enqueue-many-2.lua"),
  claim: loadScript(scriptsDirectory, "claim-7.lua"),
  ackMany: loadScript(scriptsDirectory, "ack-many-7.lua"),
  deadLetter: loadScript(scriptsDirectory, "dead-letter-8.lua"),
  renewWorker: loadScript(scriptsDirectory, "renew-worker-2.lua"),
  holds: loadScript(scriptsDirectory, "holds-2.lua"),
  release: loadScript(scriptsDirectory, "release-5.lua"),
  publishFenced: loadScript(scriptsDirectory, "publish-fenced-4.lua"),
};

const DAY_MS = 24 * 60 * 60 * 1000;
/** How long a publish of a message without a platform event id is remembered, to recognise its replay. */
const REPLAY_WINDOW_MS = 60 * 60 * 1000;

export interface RedisBusOptions extends BusOptions {
  /** Commands. The bus duplicates it for its blocking reads and its cancel subscription. */
  redis: RedisClient;
  /** Key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
  /** Most messages handed over in one claim. */
  maxBatch?: number;
  /** Approximate length each outbound stream is trimmed to. */
  streamMaxLength?: number;
  /** Pending outbound entries of a dead consumer are taken over after this long. */
  reclaimIdleMs?: number;
  redeliveryDelayMs?: number;
  /** Close `redis` too when the bus closes. */
  ownsConnection?: boolean;
  /** An inbound publish that Redis has not confirmed within this long fails (BusError "unavailable"). Default 5 s. */
  publishTimeoutMs?: number;
  /**
   * Replicas that must have an inbound message (WAIT) before its publish resolves, and a delivery
   * mark before it counts as ours: a failover then loses no accepted message and sends no reply
   * twice. 0 (the default): the primary's word is enough.
   */
  acceptAfterReplicas?: number;
  /** How long a publish or a delivery mark waits for those replicas before failing as unavailable. Default 2 s. */
  acceptTimeoutMs?: number;
  onError?: (error: unknown) => void;
  /**
   * The store's session keys under a bus prefix (the same hash tag): given, a turn's history entries
   * are appended by its ack, in the same step (`historyOnAck`).
   */
  historyKeys?: (prefix: string) => HistoryKeys;
}

export function createRedisBus(options: RedisBusOptions): MessageBus {
  return new RedisBus(options);
}

/** One partition of a partitioned bus (partitioned-bus.ts): a whole Redis bus under its own hash tag, claimed without waiting. */
export interface BusPartition extends MessageBus {
  /** One claim call now: the claims, or when the next session is due (-1: none). */
  claimNow(max: number, wakeTaken: number): Promise<{ claims: Claim[]; nextDue: number }>;
  /** Blocks on this partition's wake-up list for at most `ms`: 1 when it took a token. */
  waitForWake(ms: number): Promise<number>;
  /** The `count` sessions ready longest with when each is due; `withDeath`: when its first worker's liveness ends (-1: none). */
  peek(count: number, withDeath: boolean): Promise<{ ready: Array<{ sessionKey: string; dueAt: number }>; nextDeath?: number }>;
}

/** A Redis bus that is one partition of a partitioned bus: its keys under `{prefix}` as for a whole bus. */
export function createRedisBusPartition(options: RedisBusOptions): BusPartition {
  return new RedisBus(options);
}

class RedisBus implements BusPartition {
  private readonly redis: RedisClient;
  private readonly keys: BusKeys;
  private readonly now: () => number;
  /** What the scripts get as "now": the injected clock, or "" for Redis's own. */
  private readonly clock: () => string;
  private readonly leaseTtlMs: number;
  private readonly debounceMs: number;
  private readonly dedupeTtlMs: number;
  private readonly maxBatch: number;
  private readonly streamMaxLength: number;
  /** Claims: the claim script in a loop, the wait for wake-ups between. */
  private readonly claims: RedisClaims;
  /** Acks, batched per turn of the event loop. */
  private readonly acks: RedisAcks;
  /** Inbound publishes, batched per turn of the event loop. */
  private readonly inbox: RedisInbox;
  /** Cancel requests and broadcasts (pub/sub). */
  private readonly signals: RedisSignals;
  /** Once-only marks: a reply chunk delivered, a platform event answered. */
  private readonly marks: DeliveryMarks;
  private readonly subscriptions = new Set<Subscription>();
  /** Drafts: who watches, their publish, what finals say of them. */
  private readonly drafts: RedisDrafts;
  private closed = false;
  readonly historyOnAck: boolean;
  /** Whether the connection has been ready once: before that (start-up), commands may wait for it. */
  private connected = false;
  /** This worker's id, its leases and their batched renewal. */
  private readonly liveness: WorkerLiveness;
  /** Waits for `acceptAfterReplicas` replicas to have this connection's writes (a no-op at 0). */
  private readonly replicated: ReplicaWait;

  constructor(private readonly options: RedisBusOptions) {
    this.redis = options.redis;
    this.connected = options.redis.status === "ready";
    options.redis.on("ready", () => {
      this.connected = true;
    });
    this.keys = busKeys(options.prefix);
    this.now = options.now ?? Date.now;
    const injected = options.now;
    this.clock = injected ? () => String(injected()) : () => "";
    this.leaseTtlMs = options.leaseTtlMs ?? 30_000;
    this.debounceMs = options.debounceMs ?? 0;
    this.dedupeTtlMs = options.dedupeTtlMs ?? DAY_MS;
    this.maxBatch = options.maxBatch ?? 100;
    this.streamMaxLength = options.streamMaxLength ?? 100_000;
    this.drafts = new RedisDrafts({ redis: this.redis, keys: this.keys, clock: this.clock, streamMaxLength: this.streamMaxLength, onError: options.onError });
    this.liveness = new WorkerLiveness({
      redis: this.redis,
      keys: this.keys,
      script: scripts.renewWorker,
      leaseTtlMs: this.leaseTtlMs,
      now: this.now,
      clock: this.clock,
      holds: (claim) => this.holds(claim),
    });
    this.replicated = replicaWait(options.redis, options.acceptAfterReplicas ?? 0, options.acceptTimeoutMs ?? 2_000);
    this.signals = new RedisSignals(this.redis, this.keys);
    this.claims = new RedisClaims({
      redis: this.redis,
      keys: this.keys,
      script: scripts.claim,
      liveness: this.liveness,
      leaseTtlMs: this.leaseTtlMs,
      maxBatch: this.maxBatch,
      now: this.now,
      clock: this.clock,
      isClosed: () => this.closed,
      onError: options.onError,
    });
    this.inbox = new RedisInbox({ redis: this.redis, keys: this.keys, script: scripts.enqueueMany, clock: this.clock, debounceMs: this.debounceMs });
    const history = options.historyKeys?.(options.prefix);
    this.historyOnAck = history !== undefined;
    this.acks = new RedisAcks({ redis: this.redis, keys: this.keys, script: scripts.ackMany, clock: this.clock, streamMaxLength: this.streamMaxLength, history });
    this.marks = new DeliveryMarks({ redis: this.redis, keys: this.keys, replicated: this.replicated, dedupeTtlMs: this.dedupeTtlMs });
  }

  async publishInbound(published: InboundMessage): Promise<PublishResult> {
    this.assertOpen();
    const message = withTraceCarrier(published);
    // Accepting a message means Redis has it: while Redis is away (the connection was up and is
    // not now), say so at once instead of queueing the publish offline and answering much later.
    if (this.connected && this.redis.status !== undefined && this.redis.status !== "ready") throw unavailable(this.redis.status);
    const sessionKey = sessionKeyOf(message);
    const eventId = message.platformEventId;
    const marker = eventId === undefined ? this.keys.queued(message.id) : this.keys.seen(message.channel, eventId);
    const queued = await confirmedWithin(
      this.inbox.enqueue({ sessionKey, messageId: message.id, json: mailboxJson(message), marker, markerTtlMs: eventId === undefined ? REPLAY_WINDOW_MS : this.dedupeTtlMs }),
      this.options.publishTimeoutMs ?? 5_000,
    );
    await this.replicated();
    return { accepted: queued };
  }

  async markEventSeen(channel: string, eventId: string): Promise<boolean> {
    this.assertOpen();
    return this.marks.markEventSeen(channel, eventId);
  }

  async claimSession(options: ClaimOptions = {}): Promise<Claim | null> {
    return (await this.claimSessions({ ...options, max: 1 }))[0] ?? null;
  }

  claimSessions(options: ClaimOptions & { max: number }): Promise<Claim[]> {
    return this.claims.claimSessions(options);
  }

  claimNow(max: number, wakeTaken: number): Promise<{ claims: Claim[]; nextDue: number }> {
    this.assertOpen();
    return this.claims.claimNow(max, wakeTaken);
  }

  waitForWake(ms: number): Promise<number> {
    return this.closed ? Promise.resolve(0) : this.claims.waitForWake(ms);
  }

  peek(count: number, withDeath: boolean): Promise<{ ready: Array<{ sessionKey: string; dueAt: number }>; nextDeath?: number }> {
    return this.claims.peek(count, withDeath);
  }

  async renew(claim: Claim): Promise<boolean> {
    return this.liveness.renew(claim);
  }

  async holds(claim: Claim): Promise<boolean> {
    const held = await runScript(this.redis, scripts.holds, [this.keys.own, this.keys.workers], [claim.sessionKey, claim.token, this.clock()]);
    return held === 1;
  }

  async ack(claim: Claim, consumed = claim.messages.length, finalReply?: OutboundMessage, history?: string[]): Promise<void> {
    const reply = finalReply && withTraceCarrier(finalReply);
    if (reply) this.assertOpen();
    await this.acks.ack(claim, consumed, reply && { channel: reply.channel, event: this.drafts.messageEvent(reply) }, history);
    this.liveness.ended(claim);
  }

  async release(claim: Claim): Promise<void> {
    this.liveness.ended(claim);
    await runScript(
      this.redis,
      scripts.release,
      [this.keys.own, this.keys.ready, this.keys.mailbox(claim.sessionKey), this.keys.wake, this.keys.attempts],
      [claim.sessionKey, claim.token, this.clock()],
    );
  }

  async deadLetter(claim: Claim, reason: string, count = claim.messages.length): Promise<void> {
    await this.fenced(claim, () =>
      runScript(
        this.redis,
        scripts.deadLetter,
        [this.keys.mailbox(claim.sessionKey), this.keys.ready, this.keys.workers, this.keys.own, this.keys.wake, this.keys.attempts, this.keys.dead, this.keys.done(claim.token)],
        [claim.sessionKey, claim.token, Math.min(count, claim.messages.length), this.clock(), claim.messages[0]?.id ?? "", reason, 1_000, randomUUID(), claim.attempt],
      ),
    );
    this.liveness.ended(claim);
  }

  stats(): Promise<BusStats> {
    return busStats(this.redis, this.keys, this.now());
  }

  deadLetters(limit = 100): Promise<DeadLetter[]> {
    return readDeadLetters(this.redis, this.keys, limit);
  }

  async publishOutbound(published: OutboundMessage, claim?: Claim): Promise<void> {
    this.assertOpen();
    const message = withTraceCarrier(published);
    const event = this.drafts.messageEvent(message);
    const stream = this.keys.outbound(message.channel);
    if (!claim) {
      await this.redis.xadd(stream, "MAXLEN", "~", this.streamMaxLength, "*", "event", event);
      return;
    }
    await this.fenced(claim, () =>
      runScript(
        this.redis,
        scripts.publishFenced,
        [this.keys.own, this.keys.workers, stream, this.keys.published(claim.token, message.id)],
        [claim.sessionKey, claim.token, this.clock(), event, this.streamMaxLength],
      ),
    );
  }

  async publishDraft(draft: Draft): Promise<boolean> {
    if (this.closed) return false;
    return this.drafts.publish(draft);
  }

  async watchDrafts(channel: string, chatId?: string): Promise<Subscription> {
    this.assertOpen();
    return this.drafts.watch(channel, chatId);
  }

  async consumeOutbound(channel: string, handler: OutboundHandler): Promise<Subscription> {
    this.assertOpen();
    const subscription = await startOutboundConsumer({
      redis: this.redis,
      blocking: this.redis.duplicate(),
      keys: this.keys,
      channel,
      handler,
      reclaimIdleMs: this.options.reclaimIdleMs ?? 60_000,
      redeliveryDelayMs: this.options.redeliveryDelayMs ?? 50,
      onError: this.options.onError,
    });
    const tracked: Subscription = {
      close: async () => {
        this.subscriptions.delete(tracked);
        await subscription.close();
      },
    };
    this.subscriptions.add(tracked);
    return tracked;
  }

  markDelivered(outboundId: string): Promise<boolean> {
    return this.marks.markDelivered(outboundId);
  }

  isDelivered(outboundId: string): Promise<boolean> {
    return this.marks.isDelivered(outboundId);
  }

  recordDraftMessage(channel: string, replyId: string, platformMessageId: string): Promise<void> {
    return this.marks.recordDraftMessage(channel, replyId, platformMessageId);
  }

  draftMessageOf(channel: string, replyId: string): Promise<string | undefined> {
    return this.marks.draftMessageOf(channel, replyId);
  }

  requestCancel(sessionKey: string): Promise<void> {
    return this.signals.requestCancel(sessionKey);
  }

  onCancel(handler: (sessionKey: string) => void): Promise<Subscription> {
    return this.signals.onCancel(handler);
  }

  broadcast(topic: string, payload: string): Promise<void> {
    return this.signals.broadcast(topic, payload);
  }

  onBroadcast(topic: string, handler: (payload: string) => void): Promise<Subscription> {
    return this.signals.onBroadcast(topic, handler);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.drafts.close();
    await Promise.all([...this.subscriptions].map((subscription) => subscription.close()));
    this.claims.close();
    this.signals.close();
    if (this.options.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  /** Runs a token-checked script and turns its LEASE_LOST reply into a BusError. */
  private async fenced(claim: Claim, run: () => Promise<unknown>): Promise<void> {
    try {
      await run();
    } catch (error) {
      if (error instanceof Error && error.message.includes("LEASE_LOST")) {
        throw new BusError(`lease on ${claim.sessionKey} (token ${claim.token}) is no longer held`, "lease-lost", { cause: error });
      }
      throw error;
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new BusError("the bus is closed", "closed");
  }
}
