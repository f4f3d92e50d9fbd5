/**
 * The in-memory MessageBus for the single-process mode. Same guarantees as the Redis bus within
 * one process: per-session mailboxes, a ready queue, fenced leases that expire, coalescing,
 * dedupe, ordered outbound delivery with redelivery on failure.
 */
import { EventEmitter } from "node:events";
import { withTraceCarrier } from "../tracing.js";
import { BusError } from "../errors.js";
import { ExpiringMap } from "./expiring-map.js";
import { ExpiringSet } from "./expiring-set.js";
import { type InboundMessage, type OutboundMessage, sessionKeyOf } from "./message.js";
import { OutboundQueue } from "./memory-outbound.js";
import { ReadyQueue } from "./ready-queue.js";
import type {
  BusOptions,
  BusStats,
  Claim,
  ClaimOptions,
  DeadLetter,
  Draft,
  MessageBus,
  OutboundHandler,
  PublishResult,
  Subscription,
} from "./message-bus.js";

interface Lease {
  token: number;
  expiresAt: number;
}

interface Waiter {
  resolve: (claim: Claim | null) => void;
  cleanup: () => void;
}

export interface MemoryBusOptions extends BusOptions {
  /** Most messages handed over in one claim. */
  maxBatch?: number;
  /** First delay before redelivering an outbound event whose handler threw. */
  redeliveryDelayMs?: number;
  /**
   * Most messages the bus holds at once: inbound ones waiting for a worker or in a turn, plus
   * replies a platform has not taken yet (it is down, or slow). Past it `publishInbound` throws
   * BusError "unavailable" and stores nothing, so the channel refuses the message (the web answers
   * 503, Telegram's update is fetched again later) instead of the process's memory growing without
   * bound. A reply is never refused: the bound is applied where messages come in. Default 10,000.
   */
  maxQueued?: number;
}

const DEFAULT_MAX_QUEUED = 10_000;

const DAY_MS = 24 * 60 * 60 * 1000;

/** The draft audience entry of one chat (a channel name holds no `:`, so it never clashes with a channel's own). */
function audienceOf(channel: string, chatId: string): string {
  return `${channel}:${chatId}`;
}

export function createMemoryBus(options: MemoryBusOptions = {}): MessageBus {
  return new MemoryBus(options);
}

class MemoryBus implements MessageBus {
  private readonly now: () => number;
  private readonly leaseTtlMs: number;
  private readonly debounceMs: number;
  private readonly maxBatch: number;
  private readonly redeliveryDelayMs: number;
  private readonly mailboxes = new Map<string, InboundMessage[]>();
  /** Messages in all mailboxes, against `maxQueued`. */
  private queued = 0;
  private readonly maxQueued: number;
  private readonly ready = new ReadyQueue();
  private readonly leases = new Map<string, Lease>();
  private readonly waiters: Waiter[] = [];
  private readonly seenEvents: ExpiringSet;
  private readonly delivered: ExpiringSet;
  private readonly draftMessages: ExpiringMap<string>;
  private readonly outbound = new Map<string, OutboundQueue>();
  private readonly cancels = new EventEmitter();
  /** Who can see drafts: a channel (every chat) or `channel:chatId`, with how many declared it. */
  private readonly draftAudience = new Map<string, number>();
  private fence = 0;
  /** Claims per first message id, to recognize poison turns. */
  private readonly attempts = new Map<string, number>();
  private readonly dead: DeadLetter[] = [];
  private wakeTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(options: MemoryBusOptions) {
    this.now = options.now ?? Date.now;
    this.leaseTtlMs = options.leaseTtlMs ?? 30_000;
    this.debounceMs = options.debounceMs ?? 0;
    this.maxBatch = options.maxBatch ?? 100;
    this.redeliveryDelayMs = options.redeliveryDelayMs ?? 50;
    this.maxQueued = options.maxQueued ?? DEFAULT_MAX_QUEUED;
    this.seenEvents = new ExpiringSet(options.dedupeTtlMs ?? DAY_MS, this.now);
    this.delivered = new ExpiringSet(DAY_MS, this.now);
    this.draftMessages = new ExpiringMap(DAY_MS, this.now);
    this.cancels.setMaxListeners(0);
  }

  async publishInbound(published: InboundMessage): Promise<PublishResult> {
    this.assertOpen();
    const message = withTraceCarrier(published);
    const eventKey = message.platformEventId === undefined ? undefined : `${message.channel}:${message.platformEventId}`;
    const undelivered = this.undelivered();
    if (this.queued + undelivered >= this.maxQueued) {
      // A redelivery is still a duplicate; anything else is refused unmarked, so it is taken when the platform sends it again.
      if (eventKey !== undefined && this.seenEvents.has(eventKey)) return { accepted: false };
      throw new BusError(
        `the bus already holds ${this.queued} messages that no turn has finished and ${undelivered} replies not yet delivered (agent.maxQueuedMessages); nothing was stored`,
        "unavailable",
      );
    }
    if (eventKey !== undefined && !this.seenEvents.add(eventKey)) return { accepted: false };
    const sessionKey = sessionKeyOf(message);
    let mailbox = this.mailboxes.get(sessionKey);
    if (!mailbox) {
      mailbox = [];
      this.mailboxes.set(sessionKey, mailbox);
    }
    mailbox.push(message);
    this.queued += 1;
    if (!this.isLeased(sessionKey)) this.ready.schedule(sessionKey, this.now() + this.debounceMs);
    this.dispatch();
    return { accepted: true };
  }

  async markEventSeen(channel: string, eventId: string): Promise<boolean> {
    this.assertOpen();
    return this.seenEvents.add(`${channel}:${eventId}`);
  }

  claimSession(options: ClaimOptions = {}): Promise<Claim | null> {
    if (this.closed || options.signal?.aborted) return Promise.resolve(null);
    const claim = this.tryClaim();
    if (claim || (options.timeoutMs ?? Infinity) <= 0) return Promise.resolve(claim);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => finish(null);
      const waiter: Waiter = {
        resolve: (value) => finish(value),
        cleanup: () => {
          if (timer) clearTimeout(timer);
          options.signal?.removeEventListener("abort", onAbort);
        },
      };
      const finish = (value: Claim | null) => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        waiter.cleanup();
        resolve(value);
      };
      if (options.timeoutMs !== undefined && Number.isFinite(options.timeoutMs)) {
        timer = setTimeout(() => finish(null), options.timeoutMs);
      }
      options.signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
      this.scheduleWake();
    });
  }

  async claimSessions(options: ClaimOptions & { max: number }): Promise<Claim[]> {
    const first = await this.claimSession(options);
    if (!first) return [];
    const claims = [first];
    while (claims.length < options.max) {
      const claim = this.tryClaim();
      if (!claim) break;
      claims.push(claim);
    }
    return claims;
  }

  async renew(claim: Claim): Promise<boolean> {
    if (!this.isHeldBy(claim)) return false;
    this.leases.set(claim.sessionKey, { token: claim.token, expiresAt: this.now() + this.leaseTtlMs });
    return true;
  }

  async holds(claim: Claim): Promise<boolean> {
    return this.isHeldBy(claim);
  }

  async ack(claim: Claim, consumed = claim.messages.length, finalReply?: OutboundMessage, history: string[] = []): Promise<void> {
    if (history.length > 0) throw new BusError("the in-process bus keeps no history: append it to the store before the ack", "invalid");
    const reply = finalReply && withTraceCarrier(finalReply);
    this.assertHeld(claim);
    if (reply) {
      this.assertOpen();
      this.queueFor(reply.channel).pushMessage(reply);
    }
    const mailbox = this.mailboxes.get(claim.sessionKey) ?? [];
    this.attempts.delete(claim.messages[0]!.id);
    this.queued -= mailbox.splice(0, Math.min(consumed, claim.messages.length)).length;
    this.finishLease(claim.sessionKey, mailbox);
  }

  async deadLetter(claim: Claim, reason: string, count = claim.messages.length): Promise<void> {
    this.assertHeld(claim);
    this.dead.unshift({ sessionKey: claim.sessionKey, reason, at: this.now(), messages: claim.messages.slice(0, count) });
    if (this.dead.length > 1_000) this.dead.pop();
    await this.ack(claim, count);
  }

  async deadLetters(limit = 100): Promise<DeadLetter[]> {
    return this.dead.slice(0, limit);
  }

  async stats(): Promise<BusStats> {
    const now = this.now();
    let leased = 0;
    for (const lease of this.leases.values()) if (lease.expiresAt > now) leased += 1;
    return { ready: this.ready.size, leased, deadLetters: this.dead.length };
  }

  async release(claim: Claim): Promise<void> {
    if (!this.isHeldBy(claim)) return;
    this.finishLease(claim.sessionKey, this.mailboxes.get(claim.sessionKey) ?? []);
  }

  async publishOutbound(published: OutboundMessage, claim?: Claim): Promise<void> {
    this.assertOpen();
    const message = withTraceCarrier(published);
    if (claim) this.assertHeld(claim);
    this.queueFor(message.channel).pushMessage(message);
  }

  async publishDraft(draft: Draft): Promise<boolean> {
    if (this.closed) return false;
    if (!this.draftAudience.has(draft.channel) && !this.draftAudience.has(audienceOf(draft.channel, draft.chatId))) return false;
    this.queueFor(draft.channel).pushDraft(draft);
    return true;
  }

  async watchDrafts(channel: string, chatId?: string): Promise<Subscription> {
    const member = chatId === undefined ? channel : audienceOf(channel, chatId);
    this.draftAudience.set(member, (this.draftAudience.get(member) ?? 0) + 1);
    let open = true;
    return {
      close: async () => {
        if (!open) return;
        open = false;
        const left = (this.draftAudience.get(member) ?? 1) - 1;
        if (left > 0) this.draftAudience.set(member, left);
        else this.draftAudience.delete(member);
      },
    };
  }

  async consumeOutbound(channel: string, handler: OutboundHandler): Promise<Subscription> {
    return this.queueFor(channel).attach(handler);
  }

  async markDelivered(outboundId: string): Promise<boolean> {
    return this.delivered.add(outboundId);
  }

  async isDelivered(outboundId: string): Promise<boolean> {
    return this.delivered.has(outboundId);
  }

  async recordDraftMessage(channel: string, replyId: string, platformMessageId: string): Promise<void> {
    this.draftMessages.set(`${channel}:${replyId}`, platformMessageId);
  }

  async draftMessageOf(channel: string, replyId: string): Promise<string | undefined> {
    return this.draftMessages.get(`${channel}:${replyId}`);
  }

  async requestCancel(sessionKey: string): Promise<void> {
    this.cancels.emit("cancel", sessionKey);
  }

  async onCancel(handler: (sessionKey: string) => void): Promise<Subscription> {
    this.cancels.on("cancel", handler);
    return { close: async () => void this.cancels.off("cancel", handler) };
  }

  async broadcast(topic: string, payload: string): Promise<void> {
    this.cancels.emit(`broadcast:${topic}`, payload);
  }

  async onBroadcast(topic: string, handler: (payload: string) => void): Promise<Subscription> {
    this.cancels.on(`broadcast:${topic}`, handler);
    return { close: async () => void this.cancels.off(`broadcast:${topic}`, handler) };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    for (const waiter of [...this.waiters]) waiter.resolve(null);
    await Promise.all([...this.outbound.values()].map((queue) => queue.close()));
    this.cancels.removeAllListeners();
  }

  /**
   * Final replies queued for a platform that is being delivered to and not taken yet (it is down or
   * slow). A channel nobody consumes here is left out: its replies wait for nobody, and counting
   * them would end in refusing every message.
   */
  private undelivered(): number {
    let count = 0;
    for (const queue of this.outbound.values()) if (queue.consumed) count += queue.finals;
    return count;
  }

  private tryClaim(): Claim | null {
    this.reapExpiredLeases();
    const now = this.now();
    for (;;) {
      const sessionKey = this.ready.popDue(now);
      if (sessionKey === undefined) return null;
      const mailbox = this.mailboxes.get(sessionKey);
      if (!mailbox || mailbox.length === 0 || this.isLeased(sessionKey)) continue;
      const token = ++this.fence;
      this.leases.set(sessionKey, { token, expiresAt: now + this.leaseTtlMs });
      const firstId = mailbox[0]!.id;
      const attempt = (this.attempts.get(firstId) ?? 0) + 1;
      this.attempts.set(firstId, attempt);
      return { sessionKey, token, messages: mailbox.slice(0, this.maxBatch), attempt };
    }
  }

  private finishLease(sessionKey: string, mailbox: InboundMessage[]): void {
    this.leases.delete(sessionKey);
    if (mailbox.length > 0) {
      // Messages that arrived mid-turn have waited long enough: no debounce for them.
      this.ready.schedule(sessionKey, this.now());
    } else {
      this.mailboxes.delete(sessionKey);
    }
    this.dispatch();
  }

  private reapExpiredLeases(): void {
    const now = this.now();
    for (const [sessionKey, lease] of this.leases) {
      if (lease.expiresAt > now) continue;
      this.leases.delete(sessionKey);
      if ((this.mailboxes.get(sessionKey)?.length ?? 0) > 0) this.ready.schedule(sessionKey, now);
    }
  }

  /** Hands ready sessions to waiting claimers, then arms a timer for the next due time. */
  private dispatch(): void {
    while (this.waiters.length > 0) {
      const claim = this.tryClaim();
      if (!claim) break;
      this.waiters[0]!.resolve(claim);
    }
    this.scheduleWake();
  }

  private scheduleWake(): void {
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.wakeTimer = undefined;
    if (this.waiters.length === 0 || this.closed) return;
    const candidates = [this.ready.nextDueAt(), ...[...this.leases.values()].map((lease) => lease.expiresAt)];
    const next = Math.min(...candidates.filter((value): value is number => value !== undefined));
    if (!Number.isFinite(next)) return;
    this.wakeTimer = setTimeout(() => this.dispatch(), Math.max(0, next - this.now()) + 1);
    this.wakeTimer.unref();
  }

  private isLeased(sessionKey: string): boolean {
    const lease = this.leases.get(sessionKey);
    return lease !== undefined && lease.expiresAt > this.now();
  }

  private isHeldBy(claim: Claim): boolean {
    const lease = this.leases.get(claim.sessionKey);
    return lease !== undefined && lease.token === claim.token && lease.expiresAt > this.now();
  }

  private assertHeld(claim: Claim): void {
    if (!this.isHeldBy(claim)) {
      throw new BusError(`lease on ${claim.sessionKey} (token ${claim.token}) is no longer held`, "lease-lost");
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new BusError("the bus is closed", "closed");
  }

  private queueFor(channel: string): OutboundQueue {
    let queue = this.outbound.get(channel);
    if (!queue) {
      queue = new OutboundQueue(this.redeliveryDelayMs);
      this.outbound.set(channel, queue);
    }
    return queue;
  }
}
