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
 *    unless the policy's `groupContext` is `off`);
 * 6. a voice note is transcribed here, before publishing (voice-intake.ts): the agent receives its
 *    words marked as transcribed. Not set up, over a cap, or failed: the sender gets one plain
 *    line, and the rest of the message (a caption, an image) still goes on; nothing else, and
 *    nothing is published.
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
import { errorMessage } from "../errors.js";
import type { Store } from "../store/store.js";
import type { AdmissionOutcome, AdmissionPolicy, ChannelAdapter, PlatformEvent, RateLimit } from "./channel.js";
import type { GatewayReply } from "./dispatcher.js";
import { type VoiceIntake, createVoiceIntake, isVoice } from "./voice-intake.js";
import { SenderRateLimiter } from "./sender-rate-limiter.js";

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
  /** Transcribes voice notes before they are published. Absent: voice is refused as not set up. */
  voice?: VoiceIntake;
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
/** Without a transcriber every voice note is refused as not set up. */
const refuseAll = createVoiceIntake({ maxBytes: 0, maxSeconds: 0 });

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
  return new GatewayAdmission(options);
}

/** The policy as admission reads it, defaults applied. */
interface ResolvedPolicy {
  allowFrom: Set<string>;
  open: boolean;
  groupPolicy: AdmissionPolicy["groupPolicy"];
  pairing: boolean;
  pairingTtlMs: number;
  groupContext: NonNullable<AdmissionPolicy["groupContext"]>;
}

function resolvePolicy(given: AdmissionPolicy): ResolvedPolicy {
  return {
    allowFrom: new Set(given.allowFrom),
    open: given.open ?? false,
    groupPolicy: given.groupPolicy,
    pairing: given.pairing ?? true,
    pairingTtlMs: given.pairingTtlMs ?? HOUR_MS,
    groupContext: given.groupContext ?? "labelled",
  };
}

/** What one event is being admitted with: its session and its logger. */
interface Admitting {
  event: PlatformEvent;
  sessionKey: string;
  log: Logger;
}

/** The rules of the header, one method each, applied in order by `handle`. */
class GatewayAdmission implements Admission {
  private readonly channel: string;
  private readonly now: () => number;
  private readonly newId: (event: PlatformEvent) => string;
  private readonly logger: Logger;
  private policy: ResolvedPolicy;
  private limiter: SenderRateLimiter | undefined;
  /** The rate limit the limiter was made for, so a reload that keeps it keeps the senders' buckets. */
  private currentLimit: string;

  constructor(private readonly options: AdmissionOptions) {
    this.channel = options.channel;
    this.now = options.now ?? Date.now;
    this.newId = options.newId ?? (() => randomUUID());
    this.policy = resolvePolicy(options.policy);
    this.limiter = this.limiterOf(options.policy);
    this.currentLimit = JSON.stringify(options.policy.rateLimit ?? DEFAULT_RATE_LIMIT);
    this.logger = options.logger.child({ component: "admission", channel: this.channel });
  }

  setPolicy(next: AdmissionPolicy): void {
    const nextPolicy = resolvePolicy(next);
    const nextLimit = JSON.stringify(next.rateLimit ?? DEFAULT_RATE_LIMIT);
    const nextLimiter = nextLimit === this.currentLimit ? this.limiter : this.limiterOf(next);
    [this.policy, this.limiter, this.currentLimit] = [nextPolicy, nextLimiter, nextLimit];
    this.logger.info({ allowFrom: next.allowFrom.length, groupPolicy: next.groupPolicy }, "admission policy changed");
  }

  async handle(event: PlatformEvent): Promise<AdmissionOutcome> {
    const sessionKey = sessionKeyOf({ channel: this.channel, chatId: event.chatId });
    const admitting: Admitting = { event, sessionKey, log: lazyChild(this.logger, { sessionKey, eventId: event.eventId }) };
    const refused = this.unaddressed(event) ?? (await this.checkAccess(admitting));
    if (refused) return refused;
    const content = this.stripMention(event.text);
    if (content.trim() === "" && event.media.length === 0) return "ignored:empty";
    const limited = await this.rateLimit(admitting);
    if (limited) return limited;
    const command = parseCommand(content);
    return (await this.answerCommand(admitting, command)) ?? (await this.publish(admitting, content, command));
  }

  private limiterOf(given: AdmissionPolicy): SenderRateLimiter | undefined {
    const limit = given.rateLimit ?? DEFAULT_RATE_LIMIT;
    return limit === false ? undefined : new SenderRateLimiter(limit, this.now);
  }

  /** Rules 1 and 2: other bots, and groups the policy does not take this message from. */
  private unaddressed(event: PlatformEvent): AdmissionOutcome | undefined {
    if (event.senderIsBot) return "ignored:bot";
    if (event.chatType === "private") return undefined;
    if (this.policy.groupPolicy === "off") return "ignored:group-off";
    if (this.policy.groupPolicy === "mention" && !event.mentionsBot && !event.repliesToBot) return "ignored:not-addressed";
    return undefined;
  }

  /** Rule 3: a sender not allowed is offered pairing in a private chat, and ignored elsewhere. */
  private async checkAccess({ event, log }: Admitting): Promise<AdmissionOutcome | undefined> {
    if (await this.admitted(event)) return undefined;
    if (event.chatType === "private" && this.policy.pairing) return this.offerPairing(event, log);
    log.debug({ senderId: event.senderId }, "sender not allowed");
    return "ignored:not-allowed";
  }

  private async admitted(event: PlatformEvent): Promise<boolean> {
    const { allowFrom, open } = this.policy;
    if (open || allowFrom.has(event.senderId) || allowFrom.has(event.chatId)) return true;
    if (event.scopes?.some((scope) => allowFrom.has(scope))) return true;
    return this.options.store.pairing.isApproved(this.channel, event.senderId);
  }

  private async offerPairing(event: PlatformEvent, log: Logger): Promise<AdmissionOutcome> {
    const { channel } = this;
    const sender = { channel, senderId: event.senderId, chatId: event.chatId, ...(event.senderName ? { senderName: event.senderName } : {}) };
    const { request, created } = await this.options.store.pairing.request(sender, { ttlMs: this.policy.pairingTtlMs, now: this.now() });
    if (!created) return "ignored:pairing-pending";
    log.info({ senderId: event.senderId, senderName: event.senderName, code: request.code, expiresAt: request.expiresAt }, "pairing code sent to an unknown sender");
    await this.reply(event, "pairing", pairingReply({ channel, senderId: event.senderId, code: request.code, ttlMs: this.policy.pairingTtlMs }), log);
    return "pairing";
  }

  /** Rule 4: over the sender's rate, one notice per window, then silence. */
  private async rateLimit({ event, log }: Admitting): Promise<AdmissionOutcome | undefined> {
    const allowance = this.limiter?.take(event.senderId) ?? "allowed";
    if (allowance === "allowed") return undefined;
    if (allowance === "silent") return "ignored:rate-limited";
    log.info({ senderId: event.senderId }, "sender rate-limited");
    await this.reply(event, "rate-limit", RATE_LIMIT_NOTICE, log);
    return "rate-limited";
  }

  /** Rule 5, the commands answered here: `/usage` (when the budgets are readable here), `/stop`, `/help`. */
  private async answerCommand({ event, sessionKey, log }: Admitting, command: ChatCommand | undefined): Promise<AdmissionOutcome | undefined> {
    const { bus } = this.options;
    const usage = command === "usage" ? this.options.usage : undefined;
    if (!usage && command !== "stop" && command !== "help") return undefined;
    // Answered here, never published: the bus still remembers the event, for every gateway and
    // past a restart, so a redelivered `/stop` cannot cancel the turn the user started after it.
    if (!(await bus.markEventSeen(this.channel, event.eventId, event.chatId))) return "duplicate";
    if (usage) {
      const person = personOf({ channel: this.channel, senderId: event.senderId, metadata: this.linkedPersonOf(event) });
      await this.reply(event, "usage", await usage({ person, chat: sessionKey }), log);
      return "command:usage";
    }
    if (command === "stop") {
      await bus.requestCancel(sessionKey);
      log.info("cancel requested");
      await this.reply(event, "stop", STOP_ACKNOWLEDGEMENT, log);
      return "command:stop";
    }
    await this.reply(event, "help", helpText, log);
    return "command:help";
  }

  /** Rules 5 and 6: everything else goes onto the bus (voice notes transcribed first), and the chat sees "typing…". */
  private async publish({ event, log }: Admitting, content: string, command: ChatCommand | undefined): Promise<AdmissionOutcome> {
    const heard = await this.hearVoice(event, content, log);
    if (heard === "refused") return "voice-refused";
    if (heard === "duplicate") return "duplicate";
    const message = this.inboundMessage(heard.event, heard.content, command);
    const { accepted } = await this.options.bus.publishInbound(message);
    if (!accepted) {
      log.debug("redelivered event dropped");
      return "duplicate";
    }
    log.debug({ messageId: message.id }, "message queued");
    this.showTyping(event.chatId, log);
    return "published";
  }

  private async reply(event: PlatformEvent, what: string, text: string, log: Logger): Promise<void> {
    const id = `gateway:${this.channel}:${event.eventId}:${what}`;
    try {
      await this.options.reply({ chatId: event.chatId, chatType: event.chatType, id, replyTo: event.platformMessageId, text });
    } catch (error) {
      log.warn({ err: error }, "could not send the gateway's reply");
    }
  }

  private showTyping(chatId: string, log: Logger): void {
    const failed = (error: unknown) => log.debug({ error: errorMessage(error) }, "typing indicator failed");
    try {
      void this.options.adapter.typing(chatId).catch(failed);
    } catch (error) {
      failed(error);
    }
  }

  private stripMention(text: string): string {
    const username = this.options.botUsername?.();
    if (!username) return text;
    const escaped = username.replace(/^@/, "").replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    return text.replace(new RegExp(`^\\s*@${escaped}(?![\\w])[\\s,:]*`, "i"), "");
  }

  private inboundMessage(event: PlatformEvent, content: string, command: ChatCommand | undefined): InboundMessage {
    const username = this.options.botUsername?.();
    return {
      id: this.newId(event),
      channel: this.channel,
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
      ...this.groupContextOf(event, username),
      metadata: {
        ...withoutPerson(event.metadata),
        ...this.linkedPersonOf(event),
        platformMessageId: event.platformMessageId,
        ...(event.senderName ? { senderName: event.senderName } : {}),
      },
    };
  }

  /**
   * The event with its voice notes turned into text (rule 6). `refused`: nothing is left to publish
   * and the sender was told why; `duplicate`: a redelivery of such an event, told already.
   */
  private async hearVoice(event: PlatformEvent, content: string, log: Logger): Promise<{ event: PlatformEvent; content: string } | "refused" | "duplicate"> {
    if (!event.media.some(isVoice)) return { event, content };
    const voice = this.options.voice ?? refuseAll;
    if (voice.enabled) this.showTyping(event.chatId, log);
    const result = await voice.take(event.media, log);
    const text = [content, ...result.transcripts].filter((part) => part.trim() !== "").join("\n\n");
    const nothingLeft = text === "" && result.media.length === 0;
    if (nothingLeft && !(await this.options.bus.markEventSeen(this.channel, event.eventId, event.chatId))) return "duplicate";
    if (result.refusal) await this.reply(event, "voice", result.refusal, log);
    return nothingLeft ? "refused" : { event: { ...event, media: result.media }, content: text };
  }

  /** `{ person }` when config links the sender's account under a name (never taken from the platform event). */
  private linkedPersonOf(event: PlatformEvent): { person?: string } {
    const linked = this.options.linkedPerson?.(`${this.channel}:${event.senderId}`);
    return linked ? { person: linked } : {};
  }

  /** Who spoke in a multi-person chat, from the platform's fields (the text is never read for it). */
  private groupContextOf(event: PlatformEvent, username: string | undefined): { group?: GroupContext } {
    if (event.chatType === "private" || this.policy.groupContext === "off") return {};
    return {
      group: {
        ...(event.senderName ? { senderName: event.senderName } : {}),
        ...(username ? { botHandle: username.replace(/^@/, "") } : {}),
        addressing: this.policy.groupPolicy === "all" ? "all" : "mention",
      },
    };
  }
}

/** A platform event's metadata without `person`: who a message counts as is the config's to say (linkedPerson). */
function withoutPerson(metadata: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!metadata || !("person" in metadata)) return metadata ?? {};
  const { person: _person, ...rest } = metadata;
  return rest;
}
