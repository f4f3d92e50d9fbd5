/**
 * The draft half of the dispatcher: a reply's streamed text shown in the chat while the agent
 * writes it. Lossy by design: only the newest text matters, a draft that cannot go out is left
 * out, and the final (dispatcher.ts) is what must land.
 *
 * How a reply streams: `draft` streaming in private chats (the message's chatType, else the type
 * last seen for the chat, else the channel's `capabilities.chatType`) → adapter.draft() with a
 * draft id derived from the reply id; otherwise (`edit`, or `draft` outside private chats) the
 * first draft is sent as a message that later drafts edit. Either way at most once per
 * `draftIntervalMs`, always with the newest text, in the chat's lane (outbound-chats.ts) so a
 * draft never lands between two chunks of a final. A draft longer than one message shows its
 * first part and "…".
 *
 * The final then takes over the reply ({@link DraftDelivery.takeForFinal}): no draft of it is
 * shown after, and in edit mode the final edits the draft message into its first chunk. A final
 * this gateway holds no draft message for may still have one, sent by a gateway that died
 * mid-stream: the bus recorded it, and the final edits that one.
 *
 * Budgets: a draft goes out only when the platform's budgets have room above the reserves kept
 * for finals; when they do not, the reply's drafts degrade as draft-pacing.ts says.
 */
import type { Logger } from "pino";
import type { OutboundMessage } from "../bus/message.js";
import type { Draft, GatewayBus } from "../bus/message-bus.js";
import { ChannelError, errorMessage } from "../errors.js";
import type { Metrics } from "../metrics.js";
import type { ChannelAdapter } from "./channel.js";
import { type DraftPace, initialDraftPace, nextDraftPace } from "./draft-pacing.js";
import { stripInternalMarkers } from "./internal-markers.js";
import { draftIdOf } from "./kit/draft-id.js";
import { MEMORY_LIMIT, type OutboundChats, remember } from "./outbound-chats.js";
import { type RenderedChunk, renderedChunksOf } from "./rendered-chunks.js";
import type { GovernedCall, SendGovernor } from "./send-governor.js";
import { splitMessage } from "./split-message.js";
import { forgetOldest } from "../bounded.js";

/** A reply being streamed into one chat. */
export interface DraftState {
  replyId: string;
  chatId: string;
  replyTo?: string;
  mode: "draft" | "edit";
  /** Edit mode: the platform message the drafts edit (and the final's first chunk replaces). */
  platformMessageId?: string;
  /** Edit mode: whether the bus was asked for a draft message another gateway sent (a failover). */
  recalled?: boolean;
  /** What that message shows now, as sent. */
  shown?: string;
  /** The newest text not shown yet. */
  pending?: string;
  lastShownAt: number;
  scheduled: boolean;
  finished: boolean;
  /** How often drafts of this reply go out now, as the budgets allow. */
  pace: DraftPace;
}

export interface DraftDeliveryOptions {
  adapter: ChannelAdapter;
  bus: Pick<GatewayBus, "draftMessageOf" | "recordDraftMessage" | "isDelivered" | "markDelivered">;
  logger: Logger;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  /** The lanes and chat types the dispatcher's finals use too. */
  chats: OutboundChats;
  /** The platform's budgets of this bot account; absent: drafts are paced by their interval only. */
  governor?: SendGovernor;
  /** Counts drafts left out for want of budget. */
  metrics?: Partial<Pick<Metrics, "draftSkipped">>;
  /** Whether the dispatcher is stopping: no draft is shown or scheduled then. */
  stopping: () => boolean;
  /** A 429 arrived anyway: counts it, closes the budget it names; resolves to the wait asked. */
  rateLimited: (call: GovernedCall, error: ChannelError) => Promise<number>;
  /** The platform answered a governed call (a late answer moves its place in the budgets). */
  answered: (call: GovernedCall) => Promise<void>;
}

/** The streamed drafts of one channel's replies, and the replies whose final took over. */
export class DraftDelivery {
  private readonly drafts = new Map<string, DraftState>();
  private readonly finishedReplies = new Set<string>();

  constructor(private readonly options: DraftDeliveryOptions) {}

  /** Shows a reply's newest text, once its draft interval has passed (dropped once its final came). */
  show(draft: Draft): void {
    if (this.finishedReplies.has(draft.replyId)) return;
    this.options.chats.noteChatType(draft.chatId, draft.chatType);
    const mode = this.streamingIn(draft.chatId);
    if (mode === "none") return;
    // Counted as streaming into its chat's budgets from its first draft, shown or not: their finals need them.
    this.options.governor?.streaming({ call: "send", chatId: draft.chatId, ...this.options.chats.chatTypeOption(draft.chatId), replyId: draft.replyId });
    let state = this.drafts.get(draft.replyId);
    if (!state) {
      state = this.newState(draft.replyId, draft.chatId, draft.replyTo, mode);
      remember(this.drafts, draft.replyId, state);
    }
    state.pending = stripInternalMarkers(draft.text);
    this.schedule(state);
  }

  /**
   * The final of a reply arrived: no draft of it is shown any more. Returns its draft, which in
   * edit mode holds the message the final's first chunk is edited into (possibly one another
   * gateway sent, recalled from the bus).
   */
  async takeForFinal(message: OutboundMessage): Promise<DraftState | undefined> {
    const draft = (await this.recallDraftMessage(message)) ?? this.drafts.get(message.id);
    if (draft) draft.finished = true;
    this.finishedReplies.add(message.id);
    forgetOldest(this.finishedReplies, MEMORY_LIMIT);
    return draft;
  }

  /** The final was delivered: its draft is no longer needed. */
  forget(replyId: string): void {
    this.drafts.delete(replyId);
  }

  private newState(replyId: string, chatId: string, replyTo: string | undefined, mode: DraftState["mode"]): DraftState {
    const pace = initialDraftPace(this.options.adapter.capabilities.draftIntervalMs);
    return { replyId, chatId, replyTo, mode, lastShownAt: Number.NEGATIVE_INFINITY, scheduled: false, finished: false, pace };
  }

  /** How a reply streams into a chat: a platform draft in private chats, else one edited message. */
  private streamingIn(chatId: string): "none" | DraftState["mode"] {
    const { adapter, chats } = this.options;
    const { streaming } = adapter.capabilities;
    if (streaming === "none") return "none";
    return streaming === "draft" && adapter.draft !== undefined && chats.chatTypeOf(chatId) === "private" ? "draft" : "edit";
  }

  /**
   * Edit streaming: a final this gateway holds no draft message for may still have one, sent by
   * a gateway that died mid-stream. The bus recorded it; the final is edited into it (returned
   * as the draft state), not sent beside the partial text.
   */
  private async recallDraftMessage(message: OutboundMessage): Promise<DraftState | undefined> {
    if (message.kind !== "final" || message.metadata.gateway === true || this.streamingIn(message.chatId) !== "edit") return undefined;
    const known = this.drafts.get(message.id);
    if (known?.platformMessageId || known?.recalled) return undefined;
    const platformMessageId = await this.options.bus.draftMessageOf(this.options.adapter.name, message.id);
    if (known) known.recalled = true;
    if (platformMessageId === undefined) return undefined;
    const state: DraftState = known ?? { ...this.newState(message.id, message.chatId, message.replyTo, "edit"), finished: true };
    state.platformMessageId = platformMessageId;
    remember(this.drafts, message.id, state);
    return state;
  }

  /** Shows the newest draft text once the draft interval has passed, in the chat's lane. */
  private schedule(state: DraftState): void {
    const { now, sleep, chats, logger, adapter } = this.options;
    if (state.scheduled || state.finished || state.pace.stopped || this.options.stopping()) return;
    state.scheduled = true;
    const wait = state.lastShownAt + state.pace.intervalMs - now();
    void (async () => {
      if (wait > 0) await sleep(wait);
      await chats.laneFor(state.chatId).run(() => this.showDraft(state));
    })()
      .catch((error: unknown) => {
        const fields = { sessionKey: `${adapter.name}:${state.chatId}`, chatId: state.chatId, messageId: state.replyId };
        logger.debug({ ...fields, error: errorMessage(error) }, "draft not shown");
      })
      .finally(() => {
        state.scheduled = false;
        if (state.pending !== undefined) this.schedule(state);
      });
  }

  private async showDraft(state: DraftState): Promise<void> {
    const text = state.pending;
    state.pending = undefined;
    if (state.finished || text === undefined || this.options.stopping()) return;
    // Another gateway (both leading during a hand-over) may be delivering the final already: a
    // draft shown now would land over it, or beside it.
    if (await this.options.bus.isDelivered(`${state.replyId}#0`)) {
      state.finished = true;
      return;
    }
    state.lastShownAt = this.options.now();
    try {
      if (state.mode === "draft") await this.showAsDraft(state, text);
      else await this.showAsMessage(state, text);
    } catch (error) {
      const kind = error instanceof ChannelError ? error.kind : "other";
      if (kind === "rate-limit") {
        const call: GovernedCall = { call: state.mode === "draft" ? "draft" : state.platformMessageId ? "edit" : "send", chatId: state.chatId, ...this.options.chats.chatTypeOption(state.chatId), messageId: state.platformMessageId };
        state.lastShownAt = this.options.now() + (await this.options.rateLimited(call, error as ChannelError));
        state.pending ??= text; // still the newest: show it once the platform lets us
      }
      if (kind === "not-found") state.platformMessageId = undefined;
      if (kind === "forbidden") state.finished = true;
      throw error;
    }
  }

  /**
   * Whether the platform's budgets have room for this draft above what finals need; when not, the
   * reply's drafts degrade (draft-pacing.ts) and the newest text waits for the next try.
   */
  private async draftBudget(state: DraftState, call: GovernedCall, text: string): Promise<boolean> {
    const { governor, adapter, metrics } = this.options;
    if (!governor) return true;
    const outcome = await governor.tryAcquire(call);
    state.pace = nextDraftPace(state.pace, outcome, adapter.capabilities.draftIntervalMs);
    if (outcome === "taken") return true;
    metrics?.draftSkipped?.(adapter.name);
    if (!state.pace.stopped) state.pending ??= text;
    return false;
  }

  /** sendMessageDraft takes plain text: no markup to be refused mid-stream. */
  private async showAsDraft(state: DraftState, text: string): Promise<void> {
    const { adapter, chats } = this.options;
    const [head, ...rest] = splitMessage(text, adapter.capabilities.maxMessageLength - 2);
    const call: GovernedCall = { call: "draft", chatId: state.chatId, ...chats.chatTypeOption(state.chatId), replyId: state.replyId };
    if (!head || !(await this.draftBudget(state, call, text))) return;
    try {
      await adapter.draft!(state.chatId, draftIdOf(state.replyId), rest.length > 0 ? `${head}\n…` : head, state.replyId);
    } finally {
      await this.options.answered(call);
    }
  }

  /** Sends the draft message, or edits it: the first part of the text, and "…" when there is more. */
  private async showAsMessage(state: DraftState, text: string): Promise<void> {
    const { adapter, chats } = this.options;
    const [head, ...rest] = renderedChunksOf(adapter, text, adapter.capabilities.maxMessageLength - 2);
    if (!head || !(await this.claimDraftMessage(state))) return;
    const suffix = rest.length > 0 ? "\n…" : "";
    const lane = chats.laneFor(state.chatId);
    let body = head.rendered + suffix;
    let format = head.format;
    for (;;) {
      if (body === state.shown) return;
      await chats.pace(lane);
      const call: GovernedCall = { call: state.platformMessageId ? "edit" : "send", chatId: state.chatId, ...chats.chatTypeOption(state.chatId), messageId: state.platformMessageId, replyId: state.replyId };
      if (!(await this.draftBudget(state, call, text))) return;
      try {
        await this.sendOrEdit(state, body, format);
        state.shown = body;
        return;
      } catch (error) {
        if (!(error instanceof ChannelError && error.kind === "formatting" && format === "formatted")) throw error;
        body = head.source + suffix;
        format = "plain";
      } finally {
        lane.lastSendAt = this.options.now();
        await this.options.answered(call);
      }
    }
  }

  /**
   * Whether this gateway may show the reply's draft message: it holds one, or the bus knows one
   * another gateway sent, or it claims the right to send the first. Two gateways leading at once
   * (a hand-over) may each hold drafts of one reply: only the one that claims it starts the draft
   * message; the other edits it once the bus knows it.
   */
  private async claimDraftMessage(state: DraftState): Promise<boolean> {
    if (state.platformMessageId || state.recalled) return true;
    const { bus, adapter } = this.options;
    state.recalled = true;
    state.platformMessageId = await bus.draftMessageOf(adapter.name, state.replyId);
    if (state.platformMessageId || (await bus.markDelivered(`${state.replyId}#draft`))) return true;
    state.recalled = false;
    return false;
  }

  /** Edits the draft message into `body`, or sends it as the draft message (and records it on the bus). */
  private async sendOrEdit(state: DraftState, body: string, format: RenderedChunk["format"]): Promise<void> {
    const { adapter, chats } = this.options;
    if (state.platformMessageId) {
      await adapter.edit(state.chatId, state.platformMessageId, body, { format, ...chats.chatTypeOption(state.chatId) });
      return;
    }
    const options = { replyTo: state.replyTo, format, ...chats.chatTypeOption(state.chatId), idempotencyKey: `${state.replyId}#draft` };
    state.platformMessageId = (await adapter.send(state.chatId, body, options)).platformMessageId;
    await this.recordDraftMessage(state);
  }

  /** Lossy like the draft itself: a bus that cannot record it costs a duplicate only on a failover. */
  private async recordDraftMessage(state: DraftState): Promise<void> {
    if (state.platformMessageId === undefined) return;
    try {
      await this.options.bus.recordDraftMessage(this.options.adapter.name, state.replyId, state.platformMessageId);
    } catch (error) {
      this.options.logger.warn({ sessionKey: `${this.options.adapter.name}:${state.chatId}`, messageId: state.replyId, error: errorMessage(error) }, "could not record the draft message");
    }
  }
}
