/**
 * The MessageBus contract. Two implementations pass one conformance suite: memory and Redis.
 *
 * Inbound messages go into a mailbox per session. A worker claims a session and gets a lease
 * (with a fencing token) plus the whole pending backlog, so a burst becomes one turn. While the
 * lease is held, new messages for that session wait; `ack` drops what the turn consumed and makes
 * the session ready again if more arrived. A lease that is not renewed expires and the session is
 * claimed by another worker with a higher token; the old holder's fenced writes are then refused.
 */
import type { ChatType, InboundMessage, OutboundMessage } from "./message.js";

/** A claimed session: its pending messages (oldest first) and the lease on it. */
export interface Claim {
  sessionKey: string;
  /** Fencing token: strictly increases with every claim of the session. */
  token: number;
  messages: InboundMessage[];
  /**
   * How many times this batch's first message has been claimed. Above 1 the previous holder
   * died or lost its lease mid-turn; a batch that keeps coming back is a poison turn.
   */
  attempt: number;
}

export interface PublishResult {
  /** false when the platform event id was seen before (a redelivery): nothing was queued. */
  accepted: boolean;
}

export interface ClaimOptions {
  /** Wait at most this long for a ready session; resolves null when none came. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** A snapshot of a reply being streamed. Lossy by design: only the newest text matters. */
export interface Draft {
  /** The id the final OutboundMessage of this reply will carry. */
  replyId: string;
  channel: string;
  chatId: string;
  text: string;
  replyTo?: string;
  chatType?: ChatType;
}

export type OutboundEvent = { type: "message"; message: OutboundMessage } | { type: "draft"; draft: Draft };

/** What the consumer knows of an outbound event's chat as it hands the event over. */
export interface OutboundContext {
  /** Replies (not drafts) of the same chat queued behind this event here: its backlog. */
  behind: number;
  /**
   * When the event was published (ms since the epoch, fractions ordering events of one
   * millisecond; over Redis, Redis's clock and the stream's order).
   */
  publishedAt: number;
}

/** Handles one outbound event. Resolving acknowledges it; throwing leaves it for redelivery. */
export type OutboundHandler = (event: OutboundEvent, context?: OutboundContext) => Promise<void>;

export interface Subscription {
  close(): Promise<void>;
}

/**
 * What a gateway does with the bus: publish what platforms said (deduped), take its channels'
 * replies and drafts off it, remember what was delivered and which message shows a draft, and ask
 * a worker to cancel a turn (`/stop`). Admission, the dispatcher and the channel runtime use only this.
 */
export interface GatewayBus {
  /** Queue a message in its session's mailbox. Deduped on `platformEventId` when present. */
  publishInbound(message: InboundMessage): Promise<PublishResult>;
  /**
   * Remember a platform event that was answered without a publish (a gateway answers `/stop` and
   * `/help` itself), under the same mark a publish of it sets: true the first time, false when the
   * event was seen before, by any gateway, published or not. Lasts as long as the publish dedupe.
   * `chatId`: the chat the event came from (a partitioned bus keeps the mark with the chat's keys).
   */
  markEventSeen(channel: string, eventId: string, chatId: string): Promise<boolean>;
  /**
   * Declares that drafts of `channel` can be seen: in every chat (`chatId` omitted: a platform
   * connector that streams replies), or in the one chat `chatId` (a web page watching it). Drafts
   * of a chat nobody declared are dropped at publish, so a reply nobody can watch costs no draft
   * traffic. Lasts until the subscription is closed; one a process leaves open when it dies lapses
   * within `DRAFT_AUDIENCE_TTL_MS`, and a closed one may too (never sooner than it must).
   */
  watchDrafts(channel: string, chatId?: string): Promise<Subscription>;
  /**
   * Deliver a channel's outbound events to `handler`: one at a time and in publish order per chat,
   * different chats concurrently, so a handler may take as long as the platform needs (pacing, a
   * rate limit) before it resolves, and an event is acknowledged only once it was delivered.
   */
  consumeOutbound(channel: string, handler: OutboundHandler): Promise<Subscription>;
  /**
   * Mark an outbound id delivered. true the first time, false when it was already delivered
   * (delivery dedupe: a re-run turn repeats its ids).
   */
  markDelivered(outboundId: string): Promise<boolean>;
  /**
   * Whether an outbound id was marked delivered, by any gateway: a draft whose reply's final is
   * already under way elsewhere is not shown over it.
   */
  isDelivered(outboundId: string): Promise<boolean>;
  /**
   * Remember the platform message that shows a reply's streamed draft (edit streaming), for a day:
   * whichever gateway goes on with the reply (another, after a failover) edits that message
   * instead of sending a second one beside the partial text.
   */
  recordDraftMessage(channel: string, replyId: string, platformMessageId: string): Promise<void>;
  /** The platform message recorded for a reply's draft, if any. */
  draftMessageOf(channel: string, replyId: string): Promise<string | undefined>;
  /** Ask whichever worker runs this session's turn to cancel it. */
  requestCancel(sessionKey: string): Promise<void>;
}

/**
 * What a worker does with the bus: claim a session's pending messages under a fenced lease, keep
 * the lease, finish the turn (acknowledging and publishing the reply in one step), hand it back or
 * dead-letter it, publish replies and drafts, and hear cancellations. The turn consumer uses only this.
 */
export interface WorkerBus {
  /** Wait for a ready session and lease it. Null on timeout, abort or close. */
  claimSession(options?: ClaimOptions): Promise<Claim | null>;
  /**
   * Like `claimSession`, but takes up to `max` ready sessions at once (oldest first), in one step:
   * a worker with many free slots fills them in one round trip. Waits only while none is ready;
   * empty on timeout, abort or close.
   */
  claimSessions(options: ClaimOptions & { max: number }): Promise<Claim[]>;
  /** Extend the lease. false: it was lost (expired and taken over); the turn must stop. */
  renew(claim: Claim): Promise<boolean>;
  /**
   * Finish a turn: drop the first `consumed` messages of the claim (default: all), release the
   * lease and make the session ready again if messages remain. With `reply`, the turn's reply is
   * published in the same step (as `publishOutbound` with the claim would): either both happen or,
   * when the lease is no longer held, neither. Throws BusError("lease-lost") then.
   */
  ack(claim: Claim, consumed?: number, reply?: OutboundMessage, history?: string[]): Promise<void>;
  /**
   * Whether `ack` also appends the turn's history entries (stored text, as the store writes them)
   * to the session's history, in the same step as the reply: the Redis bus beside the Redis store.
   * Otherwise `history` must be empty, and the caller appends to the store before the ack.
   */
  readonly historyOnAck?: boolean;
  /** Give the lease back without consuming anything (the messages will be claimed again). */
  release(claim: Claim): Promise<void>;
  /**
   * Move the first `count` messages of the claim to the dead-letter list with a reason, then ack
   * them: a poison turn must not be retried forever.
   */
  deadLetter(claim: Claim, reason: string, count?: number): Promise<void>;
  /** Whether the claim still holds its session's lease (a fencing check for side effects). */
  holds(claim: Claim): Promise<boolean>;
  /**
   * Publish a reply. With a claim, the publish is fenced: it throws BusError("lease-lost") when
   * the lease was taken over, and nothing is published.
   */
  publishOutbound(message: OutboundMessage, claim?: Claim): Promise<void>;
  /**
   * Publish the newest text of a streaming reply. May be dropped; never blocks a turn. Only drafts
   * someone can see are published (see `watchDrafts`): resolves true when this one was, false when
   * nobody watches the chat's drafts (the caller may stop sending them for a while).
   */
  publishDraft(draft: Draft): Promise<boolean>;
  /** Called on every worker when a cancel is requested for any session. */
  onCancel(handler: (sessionKey: string) => void): Promise<Subscription>;
}

/** Lossy fan-out to every process (a reply to the gateway that holds a browser's socket). */
export interface BusSignals {
  /**
   * Fire-and-forget fan-out to every process (all gateways): how a reply reaches a browser socket
   * held by another gateway than the one that consumed it. Lossy; not for anything that must arrive.
   */
  broadcast(topic: string, payload: string): Promise<void>;
  onBroadcast(topic: string, handler: (payload: string) => void): Promise<Subscription>;
}

/** What operators and metrics read, and closing. */
export interface BusOps {
  /** The newest dead letters, newest first. */
  deadLetters(limit?: number): Promise<DeadLetter[]>;
  /** How many sessions wait to be claimed, are being answered, and how many dead letters are kept (metrics). */
  stats(): Promise<BusStats>;
  close(): Promise<void>;
}

/** The whole bus, as the composition root builds it: every role in one object (memory or Redis). */
export interface MessageBus extends GatewayBus, WorkerBus, BusSignals, BusOps {}

/** How long a declared draft audience outlives its last renewal (a process renews its own every third of it). */
export const DRAFT_AUDIENCE_TTL_MS = 30_000;

export interface BusStats {
  /** Sessions with messages waiting for a worker (due now or debouncing). */
  ready: number;
  /** Sessions a worker holds the lease of. */
  leased: number;
  deadLetters: number;
}

export interface DeadLetter {
  sessionKey: string;
  reason: string;
  at: number;
  messages: InboundMessage[];
}

export interface BusOptions {
  /** Lease time to live; renew at a third of it. */
  leaseTtlMs?: number;
  /** Wait this long after a message before its session becomes ready (collects bursts). */
  debounceMs?: number;
  /** How long an inbound platform event id is remembered for dedupe. */
  dedupeTtlMs?: number;
  /** Injected clock, for tests. */
  now?: () => number;
}
