/**
 * The outbound dispatcher: takes a channel's replies off the bus and puts them on the platform.
 *
 * Finals: delivered once (bus.markDelivered per chunk of the outbound id: a re-run turn repeats its ids);
 * rendered for the platform and split into chunks that fit; sent in order, the first threaded to
 * the message it answers (or editing the streamed draft message into the final). A chunk the
 * platform rejects for its markup is sent again as plain text; a rate limit is waited out and the
 * same chunk retried; a network failure is retried with backoff, then handed back to the bus.
 * Which chunks went out is remembered per outbound id (in memory), so a redelivery sends only the
 * rest. A chat that is gone (forbidden, not found) drops the message.
 *
 * Ordering: per chat. Each chat has a lane (outbound-chats.ts); its deliveries (and draft updates)
 * run one after the other, at most one platform call per `minSendIntervalMs`. The bus hands events
 * over per chat and handles chats concurrently, so the handler resolves only once the message is
 * fully delivered (pacing and rate limits included) without holding up other chats: a message is
 * acknowledged to the bus only after it landed, and a failure hands it back to the bus for
 * redelivery (the chunks already sent are remembered, so only the rest goes out).
 *
 * Drafts (streamed text, lossy) are draft-delivery.ts's: shown in the chat's lane as a platform
 * draft or as one message edited in place, until the final takes the reply over and edits that
 * message into its first chunk. Notices are not sent unless `showNotices`.
 *
 * The gateway's own replies (pairing code, rate-limit notice, `/stop`, `/help`) take the same path
 * through {@link Dispatcher.reply}: the chat's lane, splitting, pacing and delivery dedupe.
 *
 * Platform budgets (`governor`, send-governor.ts): every chunk waits for room in the platform's
 * budgets before it goes out; a draft goes out only when there is room above the reserves, and
 * degrades as draft-pacing.ts says when there is not. A 429 that still arrives closes the budget
 * it names for every gateway of the bot, and the chunk waits for it to open again.
 *
 * Internal markers (`<!-- … -->`, see internal-markers.ts) are stripped from every final and draft.
 * With `teamProgress: "status-message"`, a team run's notices go to one status message per run
 * (team-status.ts), in the chat's lane, whatever `showNotices` says.
 */
import type { Logger } from "pino";
import type { OutboundMessage } from "../bus/message.js";
import type { GatewayBus, OutboundContext, OutboundEvent, Subscription } from "../bus/message-bus.js";
import { ChannelError, errorMessage } from "../errors.js";
import { sleep } from "../sleep.js";
import { SpanKind, contextOf, inSpan } from "../tracing.js";
import { DraftDelivery } from "./draft-delivery.js";
import { OutboundChats, remember } from "./outbound-chats.js";
import { type RenderedChunk, renderedChunksOf } from "./rendered-chunks.js";
import type { GovernedCall } from "./send-governor.js";
import type { ChannelAdapter, OutboundPart, SendOptions } from "./channel.js";
import { stripInternalMarkers } from "./internal-markers.js";
import type { Dispatcher, DispatcherOptions, GatewayReply } from "./dispatcher-contract.js";
import { type TeamStatus, createTeamStatus } from "./team-status.js";

export type { Dispatcher, DispatcherOptions, GatewayReply } from "./dispatcher-contract.js";

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  return new OutboundDispatcher(options);
}

/** A final whose delivery started: chunks sent so far, kept for a redelivery to resume. */
interface Delivery {
  /** Chunks that went out (or were found already delivered). */
  sent: number;
  /** Chunks this process marked delivered on the bus. */
  marked: number;
  active: boolean;
}

class StoppedError extends Error {
  override name = "StoppedError";
}

const MAX_BACKOFF_MS = 30_000;
const DEFAULT_RATE_LIMIT_WAIT_MS = 1_000;

class OutboundDispatcher implements Dispatcher {
  private readonly adapter: ChannelAdapter;
  private readonly bus: GatewayBus;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly maxRetries: number;
  private readonly retryDelayMs: number;
  private readonly chats: OutboundChats;
  private readonly drafts: DraftDelivery;
  private readonly deliveries = new Map<string, Delivery>();
  private subscription: Subscription | undefined;
  private draftAudience: Subscription | undefined;
  private stopping = false;
  /** Aborted on stop: cuts short a wait for the platform's budgets. */
  private lifetime = new AbortController();
  private readonly teamStatus: TeamStatus | undefined;

  constructor(private readonly options: DispatcherOptions) {
    this.adapter = options.adapter;
    this.bus = options.bus;
    this.logger = options.logger;
    this.now = options.now ?? Date.now;
    this.sleep = options.sleep ?? sleep;
    this.maxRetries = options.maxRetries ?? 3;
    this.retryDelayMs = options.retryDelayMs ?? 500;
    this.chats = new OutboundChats({ adapter: this.adapter, now: this.now, sleep: this.sleep });
    this.drafts = new DraftDelivery({
      adapter: this.adapter,
      bus: this.bus,
      logger: this.logger,
      now: this.now,
      sleep: this.sleep,
      chats: this.chats,
      ...(options.governor ? { governor: options.governor } : {}),
      ...(options.metrics ? { metrics: options.metrics } : {}),
      stopping: () => this.stopping,
      rateLimited: (call, error) => this.rateLimited(call, error),
      answered: (call) => this.answered(call),
    });
    this.teamStatus =
      options.teamProgress === "status-message"
        ? createTeamStatus({
            adapter: this.adapter,
            bus: this.bus,
            logger: this.logger,
            now: this.now,
            sleep: this.sleep,
            inLane: (chatId, call) => this.chats.inLane(chatId, call),
            budget: (call) => this.statusBudget(call),
            answered: (call) => this.answered(call),
          })
        : undefined;
  }

  /** A status message is lossy like a draft: it goes out only when the budgets have room above the reserves. */
  private async statusBudget(call: { call: "send" | "edit"; chatId: string; messageId?: string }): Promise<boolean> {
    const { governor } = this.options;
    if (!governor) return true;
    // The same object, so that `answered` finds the take.
    return (await governor.tryAcquire(Object.assign(call, this.chats.chatTypeOption(call.chatId)))) === "taken";
  }

  async start(): Promise<void> {
    if (this.subscription) return;
    this.stopping = false;
    this.lifetime = new AbortController();
    const { streaming, draftsWatchedPerChat } = this.adapter.capabilities;
    // Drafts are published only for an audience: here every chat of a channel that streams.
    if (streaming !== "none" && !draftsWatchedPerChat) this.draftAudience = await this.bus.watchDrafts(this.adapter.name);
    this.subscription = await this.bus.consumeOutbound(this.adapter.name, (event, context) => this.handle(event, context));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.lifetime.abort();
    this.teamStatus?.stop();
    await this.draftAudience?.close();
    this.draftAudience = undefined;
    await this.subscription?.close();
    this.subscription = undefined;
    await this.chats.idle();
  }

  async reply(reply: GatewayReply): Promise<void> {
    const message: OutboundMessage = {
      id: reply.id,
      channel: this.adapter.name,
      chatId: reply.chatId,
      content: reply.text,
      kind: "final",
      media: [],
      metadata: { gateway: true },
      ...(reply.replyTo === undefined ? {} : { replyTo: reply.replyTo }),
      ...(reply.chatType === undefined ? {} : { chatType: reply.chatType }),
    };
    await this.onMessage(message);
  }

  private async handle(event: OutboundEvent, context?: OutboundContext): Promise<void> {
    if (this.stopping) throw new StoppedError("the dispatcher is stopping");
    if (event.type === "draft") return this.drafts.show(event.draft);
    const { message } = event;
    if (message.kind === "draft") {
      return this.drafts.show({ replyId: message.id, channel: message.channel, chatId: message.chatId, text: message.content, replyTo: message.replyTo, chatType: message.chatType });
    }
    // Lossy like drafts: the notice is acknowledged once the status message has it.
    if (this.teamStatus?.take(message)) return;
    if (message.kind === "notice" && !this.options.showNotices) return;
    if (message.kind === "notice" && message.metadata.transient === true && !this.options.showTransientNotices) return;
    await this.onMessage(message, context);
  }

  /** `context`: replies of the chat queued behind this one and when it was published, for the budgets' waiting order. */
  private async onMessage(message: OutboundMessage, context?: OutboundContext): Promise<void> {
    const queue = { behind: context?.behind ?? 0, since: context?.publishedAt ?? this.now() };
    this.chats.noteChatType(message.chatId, message.chatType);
    const fields = { chatId: message.chatId, sessionKey: `${message.channel}:${message.chatId}`, messageId: message.id };
    let delivery = this.deliveries.get(message.id);
    if (delivery?.active) return this.logger.debug(fields, "outbound message already being delivered");
    if (!delivery) {
      delivery = { sent: 0, marked: 0, active: true };
      remember(this.deliveries, message.id, delivery);
    }
    delivery.active = true;
    const lane = this.chats.laneFor(message.chatId);
    // A reply's delivery continues the trace of the turn that wrote it (in whichever process).
    const parent = message.traceContext ? { parent: contextOf(message.traceContext) } : {};
    const attributes = { "countbot.channel": message.channel, "countbot.message_id": message.id, "countbot.kind": message.kind };
    const done = lane.run(() =>
      inSpan(`deliver ${message.channel}`, { kind: SpanKind.PRODUCER, attributes, ...parent }, async (span) => {
        await this.deliver(message, delivery, queue);
        span.setAttribute("countbot.chunks_sent", delivery.sent);
      }),
    );
    await done;
  }

  private async deliver(message: OutboundMessage, delivery: Delivery, queue: { behind: number; since: number }): Promise<void> {
    const fields = { chatId: message.chatId, sessionKey: `${message.channel}:${message.chatId}`, messageId: message.id };
    const draft = await this.drafts.takeForFinal(message);
    try {
      // The gateway's own replies are plain text: no markup to render or to be refused.
      const plain = message.metadata.gateway === true;
      const text = stripInternalMarkers(message.content);
      // A message that was nothing but a marker has nothing to show.
      const chunks = text.trim() === "" ? [] : renderedChunksOf(this.adapter, text, this.adapter.capabilities.maxMessageLength, plain);
      for (let index = delivery.sent; index < chunks.length; index++) {
        const chunk = chunks[index]!;
        const editTarget = index === 0 && draft?.mode === "edit" ? draft : undefined;
        if (editTarget?.platformMessageId && editTarget.shown === chunk.rendered) {
          delivery.sent = index + 1; // the draft already shows exactly this
          continue;
        }
        // Each chunk is marked delivered (bus-wide) just before it goes out: a redelivery, another
        // gateway or a re-run turn (same id) skips what went out, and a crash loses at most the
        // chunk in flight. A chunk this process marked but failed to send is retried, not skipped.
        if (index >= delivery.marked) {
          if (!(await this.bus.markDelivered(`${message.id}#${index}`))) {
            this.logger.debug({ ...fields, chunk: index }, "chunk already delivered");
            delivery.sent = index + 1;
            continue;
          }
          delivery.marked = index + 1;
        }
        const outbound = this.options.annotateSends && !plain ? outboundPart(message, index, chunks.length) : undefined;
        const target = { replyTo: index === 0 ? message.replyTo : undefined, edit: editTarget?.platformMessageId, outbound, idempotencyKey: `${message.id}#${index}` };
        const outcome = await this.sendChunk(message, chunk, target, { backlog: queue.behind + chunks.length - index - 1, since: queue.since });
        if (outcome === "gone") {
          this.logger.warn({ ...fields, chunk: index }, "chat is gone: outbound message dropped");
          break;
        }
        delivery.sent = index + 1;
      }
      if (draft?.mode === "edit" && draft.platformMessageId !== undefined && chunks[0] !== undefined) await this.finishStream(message, draft.platformMessageId, chunks[0].rendered);
      this.deliveries.delete(message.id);
      this.drafts.forget(message.id);
    } finally {
      delivery.active = false;
    }
  }

  /** Tells the adapter a streamed message now shows the final (best effort: the text is there either way). */
  private async finishStream(message: OutboundMessage, platformMessageId: string, text: string): Promise<void> {
    if (!this.adapter.finishStream) return;
    try {
      await this.adapter.finishStream(message.chatId, platformMessageId, text);
    } catch (error) {
      this.logger.warn({ chatId: message.chatId, sessionKey: `${message.channel}:${message.chatId}`, messageId: message.id, error: errorMessage(error) }, "could not mark the streamed message finished");
    }
  }

  /**
   * Sends (or edits into place) one chunk, retrying as the error says. "gone": the chat cannot be
   * written to. Throws when the network keeps failing and the bus may still redeliver.
   */
  private async sendChunk(
    message: OutboundMessage,
    chunk: RenderedChunk,
    target: { replyTo?: string; edit?: string; outbound?: OutboundPart; idempotencyKey: string },
    rank: { backlog: number; since: number },
  ): Promise<"sent" | "gone" | "skipped"> {
    const { chatId } = message;
    const annotation = { ...(target.outbound ? { outbound: target.outbound } : {}), ...this.chats.chatTypeOption(chatId), idempotencyKey: target.idempotencyKey };
    const lane = this.chats.laneFor(chatId);
    let text = chunk.rendered;
    let format = chunk.format;
    let edit = target.edit;
    let networkFailures = 0;
    for (;;) {
      await this.chats.pace(lane);
      const cost = this.callsFor(text, { format, ...annotation }, edit !== undefined);
      const call: GovernedCall = { call: edit ? "edit" : "send", chatId, chatType: annotation.chatType, messageId: edit, cost, replyId: message.id, ...rank };
      await this.budget(call);
      try {
        try {
          if (edit) await this.adapter.edit(chatId, edit, text, { format, ...annotation });
          else await this.adapter.send(chatId, text, { replyTo: target.replyTo, format, ...annotation });
        } finally {
          await this.answered(call);
        }
        lane.lastSendAt = this.now();
        this.options.metrics?.outbound(this.adapter.name, message.metadata.gateway === true ? "gateway" : message.kind === "notice" ? "notice" : "final");
        return "sent";
      } catch (error) {
        lane.lastSendAt = this.now();
        const kind = error instanceof ChannelError ? error.kind : "other";
        const fields = { sessionKey: `${message.channel}:${chatId}`, chatId, messageId: message.id, kind, error: errorMessage(error) };
        if (kind === "rate-limit") {
          this.options.metrics?.deliveryRetried(this.adapter.name, "rate-limit");
          const waitMs = await this.rateLimited(call, error as ChannelError);
          // Governed, the next budget wait holds the chunk back until the closed budget opens.
          if (!this.options.governor) await this.wait(waitMs);
        } else if (kind === "auth") {
          throw error; // handed back to the bus: the channel is down until the credentials work again
        } else if (kind === "network") {
          this.options.metrics?.deliveryRetried(this.adapter.name, "network");
          networkFailures += 1;
          // Handed back to the bus, which redelivers it; the chunks already sent are remembered.
          if (networkFailures > this.maxRetries) throw error;
          await this.wait(Math.min(this.retryDelayMs * 2 ** Math.min(networkFailures - 1, 16), MAX_BACKOFF_MS));
        } else if (kind === "not-found" && edit) {
          edit = undefined; // the draft message was deleted: send the chunk as a new message
        } else if (kind === "forbidden" || kind === "not-found") {
          return "gone";
        } else if (format === "formatted") {
          // The markup was refused (or something else went wrong with it): the source, as is.
          if (kind !== "formatting") this.logger.warn(fields, "formatted chunk refused; sending it plain");
          this.options.metrics?.deliveryRetried(this.adapter.name, "formatting");
          text = chunk.source;
          format = "plain";
        } else if (edit) {
          // Editing the draft message failed for good: the final still lands, as a new message.
          this.logger.warn(fields, "could not edit the draft message; sending the chunk anew");
          [edit, text, format] = [undefined, chunk.rendered, chunk.format];
        } else {
          this.logger.error(fields, "platform refused a chunk; skipped");
          return "skipped";
        }
      }
    }
  }

  /** Waits for room in the platform's budgets (the send governor); stopping cuts it short. */
  private async budget(call: GovernedCall): Promise<void> {
    const { governor } = this.options;
    if (!governor) return;
    try {
      await governor.acquire(call, this.lifetime.signal);
    } catch (error) {
      if (this.lifetime.signal.aborted) throw new StoppedError("the dispatcher stopped while a chunk waited for the platform's budget");
      throw error;
    }
  }

  /** How many platform calls sending (or editing in) `text` makes: what the budgets take. */
  private callsFor(text: string, options: SendOptions, edit: boolean): number {
    return this.adapter.callsFor?.(text, options, edit) ?? 1;
  }

  /** The platform answered a governed call: a late answer moves the call's place in its budgets. */
  private async answered(call: GovernedCall): Promise<void> {
    await this.options.governor?.answered(call).catch((failure: unknown) => {
      this.logger.debug({ chatId: call.chatId, error: errorMessage(failure) }, "could not count a late platform answer in the budgets");
    });
  }

  /** A 429 arrived anyway: counted, and the budget it names closed for every gateway. Returns the wait asked. */
  private async rateLimited(call: GovernedCall, error: ChannelError): Promise<number> {
    const waitMs = error.retryAfterMs ?? DEFAULT_RATE_LIMIT_WAIT_MS;
    this.options.metrics?.rateLimited?.(this.adapter.name);
    await this.options.governor?.rateLimited(call, waitMs, error.scope).catch((failure: unknown) => {
      this.logger.warn({ chatId: call.chatId, error: errorMessage(failure) }, "could not close the platform budget after a 429");
    });
    return waitMs;
  }

  /** A wait that stopping cuts short: what is left is the bus's (or lost, when acknowledged). */
  private async wait(ms: number): Promise<void> {
    if (this.stopping) throw new StoppedError("the dispatcher stopped before the message was delivered");
    await this.sleep(ms);
  }

}

/** What one chunk of a final or notice is, for an adapter that asked (`annotateSends`). */
function outboundPart(message: OutboundMessage, chunk: number, chunks: number): OutboundPart {
  const answers = Array.isArray(message.metadata.answers) ? message.metadata.answers.filter((id): id is string => typeof id === "string") : [];
  return { messageId: message.id, kind: message.kind === "notice" ? "notice" : "final", chunk, chunks, answers, metadata: message.metadata };
}
