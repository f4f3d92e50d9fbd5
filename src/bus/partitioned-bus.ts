/**
 * The partitioned Redis bus (`redis.partitions` above 1): P whole Redis buses, each under a hash
 * tag of its own, `{prefix:p<k>}` (src/redis/keys.ts), with its own ready queue, mailboxes, leases,
 * fence, wake-up list and outbound streams. A chat lives in one partition, `partitionOf` of its
 * session key, and so do its replies and drafts (their chat's session key), so per-chat order,
 * fenced leases and exactly-once replies hold as in one bus. On a Redis Cluster the partitions'
 * slots spread over the shards, and every script still touches one slot.
 *
 * - Workers claim from every partition, oldest first across them: a sweep reads each partition's
 *   longest-ready sessions (one pipelined round trip) and claims from the partitions that hold the
 *   oldest. With nothing due anywhere, a worker blocks on every partition's wake-up list at once (a
 *   connection per partition) and sweeps again when any token comes, or when the next due session
 *   or a worker's death is due.
 *   A token taken by a wait that ended after another partition's is handed to that partition's
 *   next claim, as one bus does with its own.
 * - Gateways consume a channel's stream in every partition; the dispatcher's per-chat order needs
 *   nothing more, as a chat's events are all in one of them.
 * - Marks keyed by an id (a delivered chunk, a seen platform event, a draft's platform message)
 *   live in the partition of that id; cancels and broadcasts go through partition 0 (pub/sub
 *   reaches every node of a cluster).
 */
import { partitionOf } from "../redis/keys.js";
import { BusError } from "../errors.js";
import { type BusPartition, type RedisBusOptions, createRedisBus, createRedisBusPartition } from "./redis-bus.js";
import { type InboundMessage, type OutboundMessage, sessionKeyOf } from "./message.js";
import type { BusStats, Claim, ClaimOptions, DeadLetter, Draft, MessageBus, OutboundHandler, PublishResult, Subscription } from "./message-bus.js";

/** The longest a drained worker waits before it sweeps the partitions again (as one bus waits for its wake-up list). */
const LONGEST_WAIT_MS = 1_000;
/** How often a sweep reads when each partition's first worker dies (one bus reaps at most every half second too). */
const DEATH_READ_EVERY_MS = 500;

/**
 * The Redis bus of a deployment: one bus under `{prefix}` (partitions 1, the layout of every
 * earlier version), or `partitions` of them under `{prefix:p0}` ... `{prefix:p<P-1>}`.
 */
export function createRedisBusOf(options: RedisBusOptions & { partitions?: number }): MessageBus {
  const { partitions = 1, ...bus } = options;
  if (!Number.isInteger(partitions) || partitions < 1) throw new BusError(`redis.partitions must be a whole number of at least 1, got ${partitions}`, "invalid");
  if (partitions === 1) return createRedisBus(bus);
  const parts = Array.from({ length: partitions }, (_unused, index) => createRedisBusPartition({ ...bus, prefix: `${bus.prefix}:p${index}`, ownsConnection: false }));
  return new PartitionedBus(parts, bus.now ?? Date.now, async () => {
    if (bus.ownsConnection) await bus.redis.quit().catch(() => undefined);
  });
}

class PartitionedBus implements MessageBus {
  /** Per partition: when its first worker's liveness runs out (-1: none), as last read, and when that was read. */
  private readonly deaths: Array<{ at: number; readAt: number }>;
  /** Wake-up tokens taken per partition and not yet handed to its claim. */
  private readonly taken: number[];
  /** Each partition's wait on its wake-up list, while one runs. */
  private readonly waiting: Array<Promise<number> | undefined>;
  /** The last sweep took fewer sessions than it asked for: wait for a wake-up before the next. */
  private drained = false;
  private closed = false;
  readonly historyOnAck: boolean;

  constructor(
    private readonly parts: readonly BusPartition[],
    private readonly now: () => number,
    private readonly onClose: () => Promise<void>,
  ) {
    this.historyOnAck = parts.every((part) => part.historyOnAck === true);
    this.taken = parts.map(() => 0);
    this.deaths = parts.map(() => ({ at: -1, readAt: Number.NEGATIVE_INFINITY }));
    this.waiting = parts.map(() => undefined);
  }

  private of(sessionKey: string): BusPartition {
    return this.parts[partitionOf(sessionKey, this.parts.length)]!;
  }

  publishInbound(message: InboundMessage): Promise<PublishResult> {
    return this.of(sessionKeyOf(message)).publishInbound(message);
  }

  markEventSeen(channel: string, eventId: string, chatId: string): Promise<boolean> {
    return this.of(sessionKeyOf({ channel, chatId })).markEventSeen(channel, eventId, chatId);
  }

  async claimSession(options: ClaimOptions = {}): Promise<Claim | null> {
    return (await this.claimSessions({ ...options, max: 1 }))[0] ?? null;
  }

  async claimSessions(options: ClaimOptions & { max: number }): Promise<Claim[]> {
    const timeoutMs = options.timeoutMs ?? Number.POSITIVE_INFINITY;
    const deadline = Date.now() + timeoutMs;
    const wanted = Math.max(1, Math.floor(options.max));
    if (this.drained && timeoutMs > 0) await this.waitForWake(Math.min(timeoutMs, LONGEST_WAIT_MS), options.signal);
    for (;;) {
      if (this.closed || options.signal?.aborted) return [];
      const { claims, nextDue } = await this.sweep(wanted);
      if (claims.length > 0) {
        this.drained = claims.length < wanted;
        return claims;
      }
      this.drained = false;
      const remaining = deadline - Date.now();
      if (timeoutMs <= 0 || remaining <= 0) return [];
      const untilDue = nextDue >= 0 ? Math.max(10, nextDue - this.now()) : LONGEST_WAIT_MS;
      await this.waitForWake(Math.min(remaining, untilDue, LONGEST_WAIT_MS), options.signal);
    }
  }

  /**
   * Claims the `wanted` sessions ready longest over all partitions: reads each partition's oldest
   * (one round trip for all, pipelined), claims from those that hold them, oldest first, and hands
   * the claims back in the order they became ready. A partition with a worker whose liveness ran out
   * is claimed from too, so its dead workers are reaped. Another worker may take a session between
   * the read and the claim: the claim then takes the next one of that partition, or fewer.
   */
  private async sweep(wanted: number): Promise<{ claims: Claim[]; nextDue: number }> {
    // A partition's workers are read at most every DEATH_READ_EVERY_MS (and its next death once
    // due): a dead worker's chats wait its TTL anyway, and reading them on every sweep cost a call
    // per partition per claim.
    const readAt = this.now();
    const peeks = await Promise.all(
      this.parts.map(async (part, index) => {
        const known = this.deaths[index]!;
        const withDeath = readAt - known.readAt >= DEATH_READ_EVERY_MS || (known.at >= 0 && known.at <= readAt);
        const peek = await part.peek(wanted, withDeath);
        if (peek.nextDeath !== undefined) this.deaths[index] = { at: peek.nextDeath, readAt };
        return { ready: peek.ready, nextDeath: this.deaths[index]!.at };
      }),
    );
    const ready = peeks.flatMap((peek, index) => peek.ready.map((entry) => ({ ...entry, index }))).sort((left, right) => left.dueAt - right.dueAt);
    const plan = new Map<number, number>();
    for (const entry of ready.slice(0, wanted)) plan.set(entry.index, (plan.get(entry.index) ?? 0) + 1);
    const now = this.now();
    peeks.forEach((peek, index) => {
      if (!plan.has(index) && peek.nextDeath >= 0 && peek.nextDeath <= now) plan.set(index, 1);
    });
    const claims: Claim[] = [];
    let nextDue = ready[0]?.dueAt ?? -1;
    for (const peek of peeks) if (peek.nextDeath >= 0 && (nextDue < 0 || peek.nextDeath < nextDue)) nextDue = peek.nextDeath;
    for (const [index, count] of plan) {
      if (this.closed || claims.length >= wanted) break;
      const wakeTaken = this.taken[index]!;
      this.taken[index] = 0;
      const made = await this.parts[index]!.claimNow(Math.min(count, wanted - claims.length), wakeTaken);
      claims.push(...made.claims);
    }
    const order = new Map(ready.map((entry, position) => [entry.sessionKey, position]));
    claims.sort((left, right) => (order.get(left.sessionKey) ?? ready.length) - (order.get(right.sessionKey) ?? ready.length));
    return { claims, nextDue };
  }

  /** Waits until any partition's wake-up list gives a token, `ms` pass, or the signal aborts. */
  private async waitForWake(ms: number, signal?: AbortSignal): Promise<void> {
    const waits = this.parts.map((part, index) => {
      this.waiting[index] ??= part.waitForWake(ms).then((took) => {
        this.waiting[index] = undefined;
        this.taken[index]! += took;
        return took;
      });
      return this.waiting[index];
    });
    // Ended here too when `ms` pass: a partition's wait may still be queued behind a connection
    // that is (re)connecting, and the others may have been going since an earlier call.
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const ended = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms + 50);
      onAbort = resolve;
      signal?.addEventListener("abort", onAbort, { once: true });
    });
    try {
      await Promise.race([...waits, ended]);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort!);
    }
  }

  renew(claim: Claim): Promise<boolean> {
    return this.of(claim.sessionKey).renew(claim);
  }

  holds(claim: Claim): Promise<boolean> {
    return this.of(claim.sessionKey).holds(claim);
  }

  ack(claim: Claim, consumed?: number, reply?: OutboundMessage, history?: string[]): Promise<void> {
    return this.of(claim.sessionKey).ack(claim, consumed, reply, history);
  }

  release(claim: Claim): Promise<void> {
    return this.of(claim.sessionKey).release(claim);
  }

  deadLetter(claim: Claim, reason: string, count?: number): Promise<void> {
    return this.of(claim.sessionKey).deadLetter(claim, reason, count);
  }

  publishOutbound(message: OutboundMessage, claim?: Claim): Promise<void> {
    return this.of(claim ? claim.sessionKey : sessionKeyOf(message)).publishOutbound(message, claim);
  }

  publishDraft(draft: Draft): Promise<boolean> {
    return this.of(sessionKeyOf(draft)).publishDraft(draft);
  }

  async watchDrafts(channel: string, chatId?: string): Promise<Subscription> {
    if (chatId !== undefined) return this.of(sessionKeyOf({ channel, chatId })).watchDrafts(channel, chatId);
    return all(await Promise.all(this.parts.map((part) => part.watchDrafts(channel))));
  }

  async consumeOutbound(channel: string, handler: OutboundHandler): Promise<Subscription> {
    const subscriptions: Subscription[] = [];
    try {
      for (const part of this.parts) subscriptions.push(await part.consumeOutbound(channel, handler));
    } catch (error) {
      await all(subscriptions).close();
      throw error;
    }
    return all(subscriptions);
  }

  markDelivered(outboundId: string): Promise<boolean> {
    return this.of(outboundId).markDelivered(outboundId);
  }

  isDelivered(outboundId: string): Promise<boolean> {
    return this.of(outboundId).isDelivered(outboundId);
  }

  recordDraftMessage(channel: string, replyId: string, platformMessageId: string): Promise<void> {
    return this.of(replyId).recordDraftMessage(channel, replyId, platformMessageId);
  }

  draftMessageOf(channel: string, replyId: string): Promise<string | undefined> {
    return this.of(replyId).draftMessageOf(channel, replyId);
  }

  requestCancel(sessionKey: string): Promise<void> {
    return this.parts[0]!.requestCancel(sessionKey);
  }

  onCancel(handler: (sessionKey: string) => void): Promise<Subscription> {
    return this.parts[0]!.onCancel(handler);
  }

  broadcast(topic: string, payload: string): Promise<void> {
    return this.parts[0]!.broadcast(topic, payload);
  }

  onBroadcast(topic: string, handler: (payload: string) => void): Promise<Subscription> {
    return this.parts[0]!.onBroadcast(topic, handler);
  }

  async deadLetters(limit = 100): Promise<DeadLetter[]> {
    const letters = (await Promise.all(this.parts.map((part) => part.deadLetters(limit)))).flat();
    return letters.sort((left, right) => right.at - left.at).slice(0, limit);
  }

  async stats(): Promise<BusStats> {
    const each = await Promise.all(this.parts.map((part) => part.stats()));
    return each.reduce((sum, stats) => ({ ready: sum.ready + stats.ready, leased: sum.leased + stats.leased, deadLetters: sum.deadLetters + stats.deadLetters }), { ready: 0, leased: 0, deadLetters: 0 });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all(this.parts.map((part) => part.close()));
    await this.onClose();
  }
}

/** One subscription over several: closing it closes each. */
function all(subscriptions: Subscription[]): Subscription {
  return { close: async () => void (await Promise.all(subscriptions.map((subscription) => subscription.close()))) };
}
