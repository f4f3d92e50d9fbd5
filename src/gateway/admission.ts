/**
 * Inbound admission: what every channel does with a PlatformEvent before the agent sees it.
 *
 * In order, first match wins:
 * 1. other bots are ignored (no bot loops);
 * 2. group policy: `off` ignores groups, `mention` (default) only takes messages that mention the
 *    bot or reply to it, `all` takes everything. Being addressed never bypasses step 3;
 * 3. access: `allowFrom` holds the sender's id, the chat's id or one of the event's scopes (a
 *    Discord guild, channel or role), or the operator approved the sender through pairing, or the
 *    channel authenticated its users itself (`open`: web, terminal). EMPTY `allowFrom` DENIES
 *    everyone not approved. A stranger in a private chat
 *    gets a pairing code (once per code: later messages while it is valid get no answer; after it
 *    expires the next message gets a new one); nothing is published, no model is called. A
 *    stranger in a group is ignored silently;
 * 4. a per-sender rate limit (token bucket in memory): over it, one short notice per window, then
 *    silence;
 * 5. `/stop` cancels the session's running turn at once (whichever worker holds it), `/help` is
 *    answered here, and so is `/usage` when the gateway can read the budgets (`usage`; else a
 *    worker answers it); `/new`, `/status` and everything else go onto the bus, deduped on the
 *    platform event id, and the chat sees "typing…". A message from a group or thread carries who
 *    sent it and how the bot is addressed there (InboundMessage.group, from the event's fields,
 *    unless the policy's `groupContext` is `off`).
 *
 * Gateway-side replies (pairing code, rate-limit notice, `/stop`, `/help` and `/usage` answers) go through
 * `reply` (the dispatcher's path: the chat's lane, splitting, pacing, delivery dedupe) as plain
 * text, threaded to the message they answer, with an id derived from the event so a redelivered
 * event is not answered twice.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { lazyChild } from "../logger.js";
import { type ChatCommand, helpText, parseCommand } from "../bus/commands.js";
import { type GroupContext, type InboundMessage, personOf, sessionKeyOf } from "../bus/message.js";
import type { GatewayBus } from "../bus/message-bus.js";
import { ConfigError, errorMessage } from "../errors.js";
import type { Store } from "../store/store.js";
import type { AdmissionOutcome, AdmissionPolicy, ChannelAdapter, PlatformEvent, RateLimit } from "./channel.js";
import type { GatewayReply } from "./dispatcher.js";

export type { AdmissionOutcome, AdmissionPolicy, IgnoredReason, RateLimit } from "./channel.js";

export interface AdmissionOptions {
  /** Channel name on the bus, e.g. `telegram`. */
  channel: string;
  bus: Pick<GatewayBus, "publishInbound" | "requestCancel" | "markEventSeen">;
  store: Pick<Store, "pairing">;
  /** For "typing…". */
  adapter: Pick<ChannelAdapter, "typing">;
  /** Sends admission's own replies (the dispatcher's `reply`); resolves once delivered. */
  reply: (reply: GatewayReply) => Promise<void>;
  policy: AdmissionPolicy;
  logger: Logger;
  /**
   * The bot's username without `@`, once the adapter knows it (Telegram: after getMe). A leading
   * `@username` is stripped from the text the agent sees; unknown, the text is passed as is.
   */
  botUsername?: () => string | undefined;
  /** Clock in ms since epoch; injected for tests. */
  now?: () => number;
  /**
   * The id of the inbound message made of an event; injected for tests, and by adapters that match
   * replies (their `metadata.answers`) to what they sent. Default: a random UUID.
   */
  newId?: (event: PlatformEvent) => string;
  /**
   * `/usage`: what the person (`channel:senderId`) and the chat have spent against their budgets.
   * Unset: `/usage` goes onto the bus like `/status`, and a worker answers it.
   */
  usage?: (scope: { person: string; chat: string }) => Promise<string>;
  /**
   * The name `memory.identities` links a speaker (`channel:senderId`) under, if any: carried on the
   * message as `metadata.person`, so budgets, `/usage` and team runs count one person across their
   * linked accounts. Default: none linked.
   */
  linkedPerson?: (speakerId: string) => string | undefined;
}

export interface Admission {
  handle(event: PlatformEvent): Promise<AdmissionOutcome>;
  /** Applies a new policy from the next event on (a config reload); senders' rate buckets start anew when the limit changed. */
  setPolicy(policy: AdmissionPolicy): void;
}

const HOUR_MS = 60 * 60 * 1000;
const DEFAULT_RATE_LIMIT: RateLimit = { messages: 10, perMs: 60_000 };
export const RATE_LIMIT_NOTICE = "You are sending messages too fast. Please wait a minute before sending more.";
export const STOP_ACKNOWLEDGEMENT = "Stopping.";

/** The message a stranger gets with their code. */
export function pairingReply(details: { channel: string; senderId: string; code: string; ttlMs: number }): string {
  const minutes = Math.max(1, Math.round(details.ttlMs / 60_000));
  return [
    "I don't know you yet, so I can't answer. Ask the operator of this bot to approve your pairing code:",
    "",
    details.code,
    "",
    `They run: countbot pairing approve ${details.code}`,
    `The code expires in ${minutes} minute${minutes === 1 ? "" : "s"}. Your ${details.channel} id is ${details.senderId}.`,
  ].join("\n");
}

export function createAdmission(options: AdmissionOptions): Admission {
  const { channel, bus, store, adapter } = options;
  const now = options.now ?? Date.now;
  const newId = options.newId ?? (() => randomUUID());
  const policyOf = (given: AdmissionPolicy) => ({
    allowFrom: new Set(given.allowFrom),
    open: given.open ?? false,
    groupPolicy: given.groupPolicy,
    pairing: given.pairing ?? true,
    pairingTtlMs: given.pairingTtlMs ?? HOUR_MS,
    groupContext: given.groupContext ?? "labelled",
  });
  const limiterOf = (given: AdmissionPolicy) => {
    const limit = given.rateLimit ?? DEFAULT_RATE_LIMIT;
    return limit === false ? undefined : new SenderRateLimiter(limit, now);
  };
  let policy = policyOf(options.policy);
  let limiter = limiterOf(options.policy);
  let currentLimit = JSON.stringify(options.policy.rateLimit ?? DEFAULT_RATE_LIMIT);
  const logger = options.logger.child({ component: "admission", channel });

  async function reply(event: PlatformEvent, what: string, text: string, log: Logger): Promise<void> {
    const id = `gateway:${channel}:${event.eventId}:${what}`;
    try {
      await options.reply({ chatId: event.chatId, chatType: event.chatType, id, replyTo: event.platformMessageId, text });
    } catch (error) {
      log.warn({ err: error }, "could not send the gateway's reply");
    }
  }

  function showTyping(chatId: string, log: Logger): void {
    const failed = (error: unknown) => log.debug({ error: errorMessage(error) }, "typing indicator failed");
    try {
      void adapter.typing(chatId).catch(failed);
    } catch (error) {
      failed(error);
    }
  }

  async function admitted(event: PlatformEvent): Promise<boolean> {
    if (policy.open || policy.allowFrom.has(event.senderId) || policy.allowFrom.has(event.chatId)) return true;
    if (event.scopes?.some((scope) => policy.allowFrom.has(scope))) return true;
    return store.pairing.isApproved(channel, event.senderId);
  }

  async function offerPairing(event: PlatformEvent, log: Logger): Promise<AdmissionOutcome> {
    const sender = { channel, senderId: event.senderId, chatId: event.chatId, ...(event.senderName ? { senderName: event.senderName } : {}) };
    const { request, created } = await store.pairing.request(sender, { ttlMs: policy.pairingTtlMs, now: now() });
    if (!created) return "ignored:pairing-pending";
    log.info({ senderId: event.senderId, senderName: event.senderName, code: request.code, expiresAt: request.expiresAt }, "pairing code sent to an unknown sender");
    await reply(event, "pairing", pairingReply({ channel, senderId: event.senderId, code: request.code, ttlMs: policy.pairingTtlMs }), log);
    return "pairing";
  }

  function stripMention(text: string): string {
    const username = options.botUsername?.();
    if (!username) return text;
    const escaped = username.replace(/^@/, "").replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    return text.replace(new RegExp(`^\\s*@${escaped}(?![\\w])[\\s,:]*`, "i"), "");
  }

  function inboundMessage(event: PlatformEvent, content: string, command: ChatCommand | undefined): InboundMessage {
    const username = options.botUsername?.();
    return {
      id: newId(event),
      channel,
      chatId: event.chatId,
      senderId: event.senderId,
      content,
      media: event.media,
      // A PlatformEvent reports only whether the bot was mentioned: the bot's name, or "bot" until known.
      mentions: event.mentionsBot ? [username ?? "bot"] : [],
      receivedAt: event.receivedAt,
      platformEventId: event.eventId,
      chatType: event.chatType,
      ...(command === undefined ? {} : { command }),
      ...groupContextOf(event, username),
      metadata: {
        ...withoutPerson(event.metadata),
        ...linkedPersonOf(event),
        platformMessageId: event.platformMessageId,
        ...(event.senderName ? { senderName: event.senderName } : {}),
      },
    };
  }

  /** `{ person }` when config links the sender's account under a name (never taken from the platform event). */
  function linkedPersonOf(event: PlatformEvent): { person?: string } {
    const linked = options.linkedPerson?.(`${channel}:${event.senderId}`);
    return linked ? { person: linked } : {};
  }

  /** Who spoke in a multi-person chat, from the platform's fields (the text is never read for it). */
  function groupContextOf(event: PlatformEvent, username: string | undefined): { group?: GroupContext } {
    if (event.chatType === "private" || policy.groupContext === "off") return {};
    return {
      group: {
        ...(event.senderName ? { senderName: event.senderName } : {}),
        ...(username ? { botHandle: username.replace(/^@/, "") } : {}),
        addressing: policy.groupPolicy === "all" ? "all" : "mention",
      },
    };
  }

  return {
    setPolicy(next) {
      const nextPolicy = policyOf(next);
      const nextLimit = JSON.stringify(next.rateLimit ?? DEFAULT_RATE_LIMIT);
      const nextLimiter = nextLimit === currentLimit ? limiter : limiterOf(next);
      [policy, limiter, currentLimit] = [nextPolicy, nextLimiter, nextLimit];
      logger.info({ allowFrom: next.allowFrom.length, groupPolicy: next.groupPolicy }, "admission policy changed");
    },
    async handle(event) {
      const sessionKey = sessionKeyOf({ channel, chatId: event.chatId });
      const log = lazyChild(logger, { sessionKey, eventId: event.eventId });

      if (event.senderIsBot) return "ignored:bot";
      if (event.chatType !== "private") {
        if (policy.groupPolicy === "off") return "ignored:group-off";
        if (policy.groupPolicy === "mention" && !event.mentionsBot && !event.repliesToBot) return "ignored:not-addressed";
      }
      if (!(await admitted(event))) {
        if (event.chatType === "private" && policy.pairing) return offerPairing(event, log);
        log.debug({ senderId: event.senderId }, "sender not allowed");
        return "ignored:not-allowed";
      }

      const content = stripMention(event.text);
      if (content.trim() === "" && event.media.length === 0) return "ignored:empty";

      const allowance = limiter?.take(event.senderId) ?? "allowed";
      if (allowance === "silent") return "ignored:rate-limited";
      if (allowance === "notice") {
        log.info({ senderId: event.senderId }, "sender rate-limited");
        await reply(event, "rate-limit", RATE_LIMIT_NOTICE, log);
        return "rate-limited";
      }

      const command = parseCommand(content);
      if (command === "usage" && options.usage) {
        if (!(await bus.markEventSeen(channel, event.eventId))) return "duplicate";
        const person = personOf({ channel, senderId: event.senderId, metadata: linkedPersonOf(event) });
        await reply(event, "usage", await options.usage({ person, chat: sessionKey }), log);
        return "command:usage";
      }
      if (command === "stop" || command === "help") {
        // Answered here, never published: the bus still remembers the event, for every gateway and
        // past a restart, so a redelivered `/stop` cannot cancel the turn the user started after it.
        if (!(await bus.markEventSeen(channel, event.eventId))) return "duplicate";
        if (command === "stop") {
          await bus.requestCancel(sessionKey);
          log.info("cancel requested");
          await reply(event, "stop", STOP_ACKNOWLEDGEMENT, log);
          return "command:stop";
        }
        await reply(event, "help", helpText, log);
        return "command:help";
      }

      const message = inboundMessage(event, content, command);
      const { accepted } = await bus.publishInbound(message);
      if (!accepted) {
        log.debug("redelivered event dropped");
        return "duplicate";
      }
      log.debug({ messageId: message.id }, "message queued");
      showTyping(event.chatId, log);
      return "published";
    },
  };
}

/**
 * A token bucket per sender: `messages` at once, refilled evenly over `perMs`. Over the limit, the
 * first refusal of a window says "notice" and the rest "silent". Idle senders are forgotten.
 */
class SenderRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; updatedAt: number; noticedAt?: number }>();
  private sweptAt: number;

  constructor(
    private readonly limit: RateLimit,
    private readonly now: () => number,
  ) {
    if (!(limit.messages >= 1) || !(limit.perMs > 0)) {
      throw new ConfigError(`rate limit ${limit.messages} per ${limit.perMs} ms: allow at least 1 message per positive time`, "rateLimit");
    }
    this.sweptAt = now();
  }

  take(sender: string): "allowed" | "notice" | "silent" {
    const time = this.now();
    this.sweep(time);
    const bucket = this.buckets.get(sender) ?? { tokens: this.limit.messages, updatedAt: time };
    const refill = (Math.max(0, time - bucket.updatedAt) * this.limit.messages) / this.limit.perMs;
    bucket.tokens = Math.min(this.limit.messages, bucket.tokens + refill);
    bucket.updatedAt = time;
    this.buckets.set(sender, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return "allowed";
    }
    if (bucket.noticedAt !== undefined && time - bucket.noticedAt < this.limit.perMs) return "silent";
    bucket.noticedAt = time;
    return "notice";
  }

  /** Once a window: a bucket untouched for a whole window is full again and can go. */
  private sweep(time: number): void {
    if (time - this.sweptAt < this.limit.perMs) return;
    this.sweptAt = time;
    for (const [sender, bucket] of this.buckets) {
      if (time - bucket.updatedAt >= this.limit.perMs) this.buckets.delete(sender);
    }
  }
}

/** A platform event's metadata without `person`: who a message counts as is the config's to say (linkedPerson). */
function withoutPerson(metadata: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!metadata || !("person" in metadata)) return metadata ?? {};
  const { person: _person, ...rest } = metadata;
  return rest;
}
