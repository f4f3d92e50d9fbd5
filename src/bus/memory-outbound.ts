/**
 * The in-memory bus's outbound side: one queue per channel, one lane per chat inside it. Kept apart
 * from the inbound mailboxes and leases in `memory-bus.ts` because the two halves share nothing but
 * the bus's open/closed state: delivery order, draft replacement and redelivery with backoff are a
 * concern of their own (the Redis bus keeps its outbound side in `redis-outbound.ts` the same way).
 */
import { sleep } from "../sleep.js";
import { ChatLane } from "./chat-lane.js";
import type { OutboundMessage } from "./message.js";
import type { Draft, OutboundEvent, OutboundHandler, Subscription } from "./message-bus.js";
import { forgetOldest } from "../bounded.js";

/**
 * One channel's outbound events. Each chat has its own lane: a chat's events are handed over one
 * at a time in publish order, while different chats are handled concurrently (so a handler may
 * wait until a message is fully delivered without holding up other chats).
 */
export class OutboundQueue {
  private readonly lanes = new Map<string, ChatOutbox>();
  private handler: OutboundHandler | undefined;
  private readonly finished = new Set<string>();
  private closed = false;

  /** Finals queued and not delivered yet. */
  finals = 0;

  constructor(private readonly redeliveryDelayMs: number) {}

  /** Whether a handler takes this channel's events (the channel runs in this process). */
  get consumed(): boolean {
    return this.handler !== undefined && !this.closed;
  }

  pushMessage(message: OutboundMessage): void {
    this.rememberFinished(message.id);
    this.finals += 1;
    this.laneFor(message.chatId).pushMessage(message);
  }

  pushDraft(draft: Draft): void {
    if (this.finished.has(draft.replyId)) return;
    this.laneFor(draft.chatId).pushDraft(draft);
  }

  attach(handler: OutboundHandler): Subscription {
    this.handler = handler;
    this.closed = false;
    for (const lane of this.lanes.values()) lane.pump();
    return {
      close: async () => {
        if (this.handler === handler) this.handler = undefined;
        await this.idle();
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.handler = undefined;
    await this.idle();
  }

  private async idle(): Promise<void> {
    await Promise.all([...this.lanes.values()].map((lane) => lane.idle()));
  }

  private laneFor(chatId: string): ChatOutbox {
    let lane = this.lanes.get(chatId);
    if (!lane) {
      lane = new ChatOutbox(this.redeliveryDelayMs, {
        handler: () => (this.closed ? undefined : this.handler),
        delivered: () => (this.finals -= 1),
        // An empty lane goes away: the map does not grow with every chat ever served.
        onIdle: () => {
          if (this.lanes.get(chatId) === lane && lane!.empty) this.lanes.delete(chatId);
        },
      });
      this.lanes.set(chatId, lane);
    }
    return lane;
  }

  private rememberFinished(replyId: string): void {
    this.finished.add(replyId);
    forgetOldest(this.finished, 10_000);
  }
}

/**
 * One chat's outbound events, handed over one at a time in publish order (the pump runs in the
 * chat's lane). A pending draft is replaced by a newer one for the same reply, and dropped once
 * that reply's final is queued.
 */
class ChatOutbox {
  private events: OutboundEvent[] = [];
  /** Drafts waiting in `events`, by reply id: a newer draft replaces the text in place. */
  private pendingDrafts = new Map<string, OutboundEvent & { type: "draft" }>();
  private readonly lane = new ChatLane();
  /** When each queued event was published. */
  private readonly publishedAt = new WeakMap<OutboundEvent, number>();
  /** Replies (not drafts) in `events`. */
  private messages = 0;

  constructor(
    private readonly redeliveryDelayMs: number,
    private readonly owner: { handler: () => OutboundHandler | undefined; delivered: () => void; onIdle: () => void },
  ) {}

  get empty(): boolean {
    return this.events.length === 0 && !this.lane.busy;
  }

  /** Resolves once the pump running now has stopped. */
  idle(): Promise<void> {
    return this.lane.idle();
  }

  pushMessage(message: OutboundMessage): void {
    const draft = this.pendingDrafts.get(message.id);
    if (draft) {
      this.events.splice(this.events.indexOf(draft), 1);
      this.pendingDrafts.delete(message.id);
    }
    const event = { type: "message" as const, message };
    this.publishedAt.set(event, performance.timeOrigin + performance.now());
    this.events.push(event);
    this.messages += 1;
    this.pump();
  }

  pushDraft(draft: Draft): void {
    const pending = this.pendingDrafts.get(draft.replyId);
    if (pending) {
      pending.draft = draft;
    } else {
      const event = { type: "draft" as const, draft };
      this.publishedAt.set(event, performance.timeOrigin + performance.now());
      this.pendingDrafts.set(draft.replyId, event);
      this.events.push(event);
    }
    this.pump();
  }

  pump(): void {
    if (this.lane.busy || !this.owner.handler()) return;
    // The lane's own bookkeeping settles before this callback: a new pump may start from here.
    void this.lane.run(() => this.run()).finally(() => {
      if (this.events.length > 0 && this.owner.handler()) this.pump();
      else this.owner.onIdle();
    });
  }

  private async run(): Promise<void> {
    let failures = 0;
    for (let handler = this.owner.handler(); handler && this.events.length > 0; handler = this.owner.handler()) {
      const event = this.events[0]!;
      // A draft leaves the pending map when it is handed over: a newer one queues behind.
      if (event.type === "draft") this.pendingDrafts.delete(event.draft.replyId);
      try {
        // The first of `events`: every other reply queued is behind it.
        await handler(event, { behind: this.messages - (event.type === "message" ? 1 : 0), publishedAt: this.publishedAt.get(event) ?? Date.now() });
        failures = 0;
        if (this.events[0] === event) this.events.shift();
        else this.events.splice(this.events.indexOf(event), 1);
        if (event.type === "message") this.messages -= 1;
        if (event.type === "message") this.owner.delivered();
      } catch {
        // Drafts are disposable; finals are retried with backoff until delivered or closed.
        if (event.type === "draft") {
          this.events.splice(this.events.indexOf(event), 1);
          continue;
        }
        failures += 1;
        const delay = Math.min(this.redeliveryDelayMs * 2 ** (failures - 1), 30_000);
        await sleep(delay);
      }
    }
  }
}
