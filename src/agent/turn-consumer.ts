/**
 * Consumes the bus: claims sessions (bounded concurrency across sessions, one turn at a time per
 * session), runs their turns, streams drafts and tool notices, publishes the final reply fenced
 * by the lease (with the turn's token usage in its `metadata.usage`), then acks. Messages that
 * arrived during a turn are claimed together as the next, except those marked
 * `metadata.ownTurn` (a request that waits for its own answer: the OpenAI-compatible endpoint's).
 */
import type { Logger } from "pino";
import { type InboundMessage, type OutboundMessage, SYSTEM_CHANNEL, replyTarget } from "../bus/message.js";
import { refusedPayloadOf } from "../bus/payloads.js";
import type { Claim, Subscription, WorkerBus } from "../bus/message-bus.js";
import type { TurnIntercept } from "../bus/turn-intercept.js";
import { BusError, CancelledError, errorMessage } from "../errors.js";
import { sleep } from "../sleep.js";
import type { Agent } from "./agent.js";
import { isShutdown, shutdownReason } from "./cancellation.js";
import { type ChatCommand, helpText } from "../bus/commands.js";
import type { TurnEvent } from "./react-loop.js";
import { lazyChild } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { Usage } from "../providers/chat-model.js";
import { type HistoryEntry, type SessionSnapshot, storedEntryTexts } from "../store/store.js";
import { personOf } from "../budget/policy.js";
import { combineContent, groupSettingOf, speakersOf } from "../prompt/speakers.js";
import { relayingReasoning } from "./reasoning-relay.js";
import { type Span, failSpan } from "../tracing.js";
import { inTurnSpan } from "./turn-span.js";
import { DraftThrottle } from "./draft-throttle.js";
import { answering, finalMessage, outboundId, replyToOf, toolNotice } from "./turn-replies.js";

export { combineContent } from "../prompt/speakers.js";
export type { TurnIntercept } from "../bus/turn-intercept.js";
export { outboundId } from "./turn-replies.js";

/** Most sessions one claim takes. */
const CLAIM_BATCH = 64;

export interface TurnConsumerOptions {
  bus: WorkerBus;
  agent: Agent;
  /**
   * The agent a turn goes to, by its first message (an agent profile's, src/config/agents.ts), and
   * whether the intercept (team triggers) may take its messages. Default: `agent`, intercepted.
   */
  agentFor?: (message: InboundMessage) => { agent: Agent; intercept: boolean; profile?: string };
  logger: Logger;
  /** Turns run at once (different sessions). */
  concurrency: number;
  /** Must match the bus lease TTL; renewal happens at a third of it. */
  leaseTtlMs?: number;
  /** Minimum time between two drafts of one reply. */
  draftIntervalMs?: number;
  /**
   * Claims of one batch before it is treated as a poison turn (its holders keep dying): the
   * messages go to the dead-letter list and the user gets one short error reply.
   */
  maxAttempts?: number;
  /** Return false to drop a turn's reply instead of sending it (a silent heartbeat, say). */
  replyFilter?: (messages: InboundMessage[], reply: string) => boolean;
  /** Counts turns and their time. */
  metrics?: Pick<Metrics, "turn">;
  now?: () => number;
  /** Messages the app answers itself, without a model turn (a team trigger, say). */
  intercept?: TurnIntercept;
  /** Relay the model's reasoning to the chat as notices marked `metadata.reasoning` (`agent.showReasoning`). */
  showReasoning?: boolean;
}

interface RunningTurn {
  controller: AbortController;
  done: Promise<void>;
}

export class TurnConsumer {
  private readonly running = new Map<string, RunningTurn>();
  private readonly stopController = new AbortController();
  private cancelSubscription: Subscription | undefined;
  private slotFreed: (() => void) | undefined;
  private loop: Promise<void> | undefined;

  constructor(private readonly options: TurnConsumerOptions) {}

  /** Starts consuming; resolves when `stop` has been called and the claim loop has ended. */
  run(): Promise<void> {
    this.loop ??= this.consume();
    return this.loop;
  }

  /** Stops claiming; lets running turns finish within `graceMs`, then cancels them. */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopController.abort();
    this.slotFreed?.();
    await this.loop;
    const pending = [...this.running.values()].map((turn) => turn.done);
    const grace = new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref());
    await Promise.race([Promise.all(pending), grace]);
    for (const turn of this.running.values()) turn.controller.abort(shutdownReason);
    await Promise.all([...this.running.values()].map((turn) => turn.done));
    await this.cancelSubscription?.close();
  }

  /** Number of turns running now. */
  get active(): number {
    return this.running.size;
  }

  private async consume(): Promise<void> {
    const { bus, logger } = this.options;
    const stopping = this.stopController.signal;
    this.cancelSubscription = await bus.onCancel((sessionKey) => {
      this.running.get(sessionKey)?.controller.abort(new CancelledError("stopped by the user"));
    });
    while (!stopping.aborted) {
      if (this.running.size >= this.options.concurrency) {
        await new Promise<void>((resolve) => (this.slotFreed = resolve));
        continue;
      }
      let claims: Claim[];
      try {
        // Every free slot at once (up to a batch): a burst of chats is claimed in a few round trips.
        const free = Math.min(this.options.concurrency - this.running.size, CLAIM_BATCH);
        claims = await bus.claimSessions({ timeoutMs: 5_000, signal: stopping, max: free });
      } catch (error) {
        logger.error({ err: error }, "claiming a session failed; retrying");
        await sleep(1_000);
        continue;
      }
      for (const claim of claims) this.start(claim);
    }
  }

  private start(claim: Claim): void {
    const controller = new AbortController();
    const done = inTurnSpan(claim, this.options.now ?? Date.now, (span) => this.handle(claim, controller, span))
      .catch((error: unknown) => this.options.logger.error({ err: error, session: claim.sessionKey }, "turn handling failed"))
      .finally(() => {
        this.running.delete(claim.sessionKey);
        const freed = this.slotFreed;
        this.slotFreed = undefined;
        freed?.();
      });
    this.running.set(claim.sessionKey, { controller, done });
  }

  private async handle(claim: Claim, controller: AbortController, span: Span): Promise<void> {
    const { bus, logger } = this.options;
    const ttl = this.options.leaseTtlMs ?? 30_000;
    let leaseLost = false;
    const renewal = setInterval(() => {
      bus.renew(claim).then(
        (held) => {
          if (held) return;
          leaseLost = true;
          controller.abort(new BusError(`lease on ${claim.sessionKey} lost`, "lease-lost"));
        },
        (error: unknown) => logger.warn({ err: error, session: claim.sessionKey }, "lease renewal failed"),
      );
    }, Math.max(50, Math.floor(ttl / 3)));

    const intercept = this.options.intercept;
    let batch = takeBatch(claim.messages, intercept ? (message) => intercept.mayTake(message) : undefined);
    const first = batch.messages[0]!;
    const { agent, intercept: intercepts, profile } = this.options.agentFor?.(first) ?? { agent: this.options.agent, intercept: true };
    const log = lazyChild(logger, { session: claim.sessionKey, message: first.id });
    if (claim.attempt > 1) log.warn({ attempt: claim.attempt }, "re-running a turn that was interrupted (worker crash or lost lease)");
    const startedAt = (this.options.now ?? Date.now)();
    const done = (outcome: Parameters<Metrics["turn"]>[1]) => {
      span.setAttribute("countbot.outcome", outcome);
      this.options.metrics?.turn(((this.options.now ?? Date.now)() - startedAt) / 1000, outcome, profile);
    };
    if (batch.refused !== undefined || claim.attempt > (this.options.maxAttempts ?? 3)) {
      clearInterval(renewal);
      if (batch.refused === undefined) await this.deadLetter(claim, batch.messages, `its turn was interrupted ${claim.attempt - 1} times (worker crash or lost lease)`, log);
      else await this.deadLetter(claim, batch.messages, `its payload did not match the message model (${batch.refused})`, log, "Sorry, I could not read that message. Please send it again.");
      done("dead-letter");
      return;
    }
    // What the turn adds to the history, saved by its ack when the bus can (one step with the reply).
    const history: HistoryEntry[] | undefined = bus.historyOnAck ? [] : undefined;
    try {
      let reply: string;
      let usage: Usage | undefined;
      // One read of the session serves both the crash check and the turn.
      const snapshot = batch.command ? undefined : await agent.loadSession(claim.sessionKey);
      const answered = snapshot && (await agent.previousAnswer(claim.sessionKey, batch.messages.map((message) => message.id), snapshot));
      if (answered) {
        // A crash after the history write: repeat the saved reply (same id, so delivery dedupes it).
        batch = { messages: batch.messages.slice(0, answered.count) };
        ({ reply, usage } = answered);
      } else if (batch.command) {
        reply = await this.runCommand(agent, batch.command, claim, batch.messages[0]!);
      } else {
        const taken = batch.interceptable && intercepts ? await intercept?.take(first, claim) : undefined;
        // An intercept that looked at the message may have written to the session: read it again then.
        ({ reply, usage } = taken === undefined ? await this.answerClaim(agent, claim, batch.messages, controller.signal, batch.interceptable ? undefined : snapshot, history) : { reply: taken, usage: undefined });
      }
      if (leaseLost) return;
      if (isShutdown(controller.signal)) {
        // Interrupted by a deploy, not by the user: another worker runs the turn again.
        await bus.release(claim);
        return;
      }
      // The reply and the ack in one step: a turn's end is one round trip.
      let sent: OutboundMessage | undefined;
      if (this.options.replyFilter?.(batch.messages, reply) ?? true) {
        const final = finalMessage(batch.messages, reply);
        if (usage) final.metadata.usage = { ...usage };
        sent = answering(final, batch.messages);
      }
      await bus.ack(claim, batch.messages.length, sent, history && history.length > 0 ? storedEntryTexts(history) : undefined);
      done(controller.signal.aborted ? "cancelled" : "answered");
    } catch (error) {
      if (leaseLost || (error instanceof BusError && error.code === "lease-lost")) {
        log.warn("lease lost mid-turn; another worker owns the session now");
        return;
      }
      log.error({ err: error }, "turn failed");
      failSpan(span, error);
      // Nothing accepted is dropped silently: the user hears about the failure.
      const apology = finalMessage(batch.messages, `Sorry, something went wrong on my side: ${errorMessage(error)}`);
      await bus.ack(claim, batch.messages.length, answering(apology, batch.messages));
      done("failed");
    } finally {
      clearInterval(renewal);
    }
  }

  /** A poison turn, or a payload the bus refused: park its messages, tell the user once, move on to the chat's next messages. */
  private async deadLetter(claim: Claim, messages: InboundMessage[], reason: string, log: Logger, apology = "Sorry, I could not process that message: it failed repeatedly. Please try again or rephrase it."): Promise<void> {
    const { bus } = this.options;
    log.error({ attempt: claim.attempt }, `dead-lettering messages: ${reason}`);
    const notice = finalMessage(messages, apology);
    await bus.publishOutbound(answering(notice, messages), claim);
    await bus.deadLetter(claim, reason, messages.length);
  }

  private async runCommand(agent: Agent, command: ChatCommand, claim: Claim, message: InboundMessage): Promise<string> {
    const sessionKey = claim.sessionKey;
    switch (command) {
      case "new":
        await agent.resetSession(sessionKey, { token: claim.token });
        return "Started a new conversation.";
      case "status":
        return agent.status(sessionKey);
      case "usage":
        return agent.usage(sessionKey, message.channel === SYSTEM_CHANNEL ? undefined : personOf(message));
      case "help":
        return helpText;
      case "stop":
        return "Nothing is running.";
    }
  }

  private async answerClaim(
    agent: Agent,
    claim: Claim,
    messages: InboundMessage[],
    signal: AbortSignal,
    snapshot: SessionSnapshot | undefined,
    history: HistoryEntry[] | undefined,
  ): Promise<{ reply: string; usage: Usage }> {
    const { bus } = this.options;
    const first = messages[0]!;
    const target = replyTarget(first);
    const messageIds = messages.map((message) => message.id);

    const replyId = outboundId(first, 0);
    let sequence = 0;
    const drafts = new DraftThrottle(this.options.draftIntervalMs ?? 150, (text) =>
      bus.publishDraft({ replyId, channel: target.channel, chatId: target.chatId, text, ...optional("replyTo", replyToOf(messages)), ...(first.chatType ? { chatType: first.chatType } : {}) }),
    );
    const publishReasoning = async (text: string) => {
      sequence += 1;
      await bus.publishOutbound({ ...finalMessage(messages, text), id: outboundId(first, sequence), kind: "notice", metadata: { reasoning: true } }, claim);
    };
    const onEvent = async (event: TurnEvent) => {
      if (event.type === "delta") drafts.append(event.text);
      else if (event.type === "notice") {
        sequence += 1;
        await bus.publishOutbound({ ...finalMessage(messages, event.text), id: outboundId(first, sequence), kind: "notice", metadata: { budget: true } }, claim);
      }
      else if (event.type === "tool-start") {
        // The text said before the call shows up before the call's notice.
        drafts.flush();
        sequence += 1;
        await bus.publishOutbound(
          {
            ...finalMessage(messages, toolNotice(event.call.name, event.call.arguments)),
            id: outboundId(first, sequence),
            kind: "notice",
            metadata: { tool: event.call.name },
          },
          claim,
        );
      }
    };
    try {
      const result = await agent.respond({
        sessionKey: claim.sessionKey,
        channel: target.channel,
        chatId: target.chatId,
        content: combineContent(messages),
        media: messages.flatMap((message) => message.media),
        speakers: speakersOf(messages),
        ...optional("group", groupSettingOf(messages)),
        background: messages.every((message) => message.channel === SYSTEM_CHANNEL),
        messageIds,
        signal,
        listener: this.options.showReasoning ? relayingReasoning(onEvent, publishReasoning) : onEvent,
        fence: { token: claim.token },
        snapshot,
        ...(history ? { keepHistory: (entries: HistoryEntry[]) => history.push(...entries) } : {}),
        ...parentChatOf(messages),
        ...personOfTurn(messages),
        send: async (content, media = []) => {
          sequence += 1;
          await bus.publishOutbound({ ...finalMessage(messages, content), id: outboundId(first, sequence), media }, claim);
        },
      });
      return { reply: result.reply, usage: result.usage };
    } finally {
      drafts.stop();
    }
  }
}

/**
 * A claim's leading messages that form one turn: one command, one message the intercept may take,
 * one message that asked for a turn of its own, or a run of ordinary messages.
 */
function takeBatch(messages: InboundMessage[], mayTake?: (message: InboundMessage) => boolean): { messages: InboundMessage[]; command?: ChatCommand; interceptable?: boolean; refused?: string } {
  const refused = refusedPayloadOf(messages[0]!);
  if (refused !== undefined) return { messages: messages.slice(0, 1), refused };
  const { command } = messages[0]!;
  if (command) return { messages: messages.slice(0, 1), command };
  if (mayTake?.(messages[0]!)) return { messages: messages.slice(0, 1), interceptable: true };
  if (wantsOwnTurn(messages[0]!)) return { messages: messages.slice(0, 1) };
  const end = messages.findIndex((message) => message.command !== undefined || mayTake?.(message) === true || wantsOwnTurn(message) || refusedPayloadOf(message) !== undefined);
  return { messages: end === -1 ? messages : messages.slice(0, end) };
}

/** A message whose sender waits for the answer to it alone (an HTTP request): never coalesced. */
function wantsOwnTurn(message: InboundMessage): boolean {
  return message.metadata.ownTurn === true;
}

/**
 * Whose budget a turn counts against: the person whose message started it (in a burst from several
 * people, the first; the others' messages ride along). A background event has nobody's.
 */
function personOfTurn(messages: InboundMessage[]): { person?: string } {
  const first = messages.find((message) => message.channel !== SYSTEM_CHANNEL);
  return first ? { person: personOf(first) } : {};
}

/** The chat a thread was opened from, when the platform says (Discord's `threads.inheritParent`): its recent talk starts the thread's context. */
function parentChatOf(messages: InboundMessage[]): { parentChatId?: string } {
  const parent = messages.find((message) => typeof message.metadata.parentChatId === "string")?.metadata.parentChatId;
  return typeof parent === "string" && parent !== "" ? { parentChatId: parent } : {};
}

/** `{ [key]: value }`, or nothing when the value is undefined (optional properties stay absent). */
function optional<Key extends string, Value>(key: Key, value: Value | undefined): { [K in Key]?: Value } {
  return (value === undefined ? {} : { [key]: value }) as { [K in Key]?: Value };
}
