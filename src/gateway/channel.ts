/**
 * The channel contract: what a platform (Telegram, Discord, Feishu, web, terminal) provides, and
 * what the shared runtime in src/gateway does for every platform.
 *
 * A platform is a {@link ChannelPlugin} in `channels/<name>/`, listed in `channels/index.ts`. Its
 * adapter speaks the platform's API and turns its payloads into {@link PlatformEvent}s; everything
 * else (admission, commands, splitting, formatting fallback, pacing, retries, drafts, delivery
 * dedupe, the leader lease) is the shared runtime's. Core code never imports a platform SDK, and
 * this file imports no implementation.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { z } from "zod";
import type { ChatType, Media } from "../bus/message.js";
import type { BusSignals, GatewayBus } from "../bus/message-bus.js";
import type { ChatEventLog } from "../store/chat-event-log.js";
import type { PlatformQuotas } from "./quotas.js";
import type { GroupContextSetting, TeamProgressSetting } from "./group-settings.js";

export type { ChatType } from "../bus/message.js";

export interface ChannelCapabilities {
  /** Longest text one platform message may carry (Telegram: 4096, Discord: 2000), as the adapter's `measure` counts. */
  maxMessageLength: number;
  /**
   * How a reply streams: `draft` (Telegram sendMessageDraft, private chats only), `edit` (one
   * message edited as text arrives), `none` (only the final is sent).
   */
  streaming: "draft" | "edit" | "none";
  /** Least time between two draft updates of one chat. */
  draftIntervalMs: number;
  /**
   * The adapter itself tells the bus which chats can see drafts (`bus.watchDrafts(channel, chatId)`,
   * the web page: only chats with a page open). Otherwise the dispatcher declares every chat of a
   * channel that streams, and none of one that does not.
   */
  draftsWatchedPerChat?: boolean;
  /** Least time between two messages to one chat (the platform's per-chat limit). */
  minSendIntervalMs: number;
  /**
   * Every chat of this channel is of this type (the terminal's and the web page's are private), for
   * replies whose message does not say (a background job's completion).
   */
  chatType?: ChatType;
}

/** Text as a platform shows it, rendered from the model's Markdown by the platform's own renderer. */
export interface RenderedText {
  text: string;
  /**
   * `formatted`: in the platform's markup; a platform that refuses the markup gets the Markdown
   * source as plain text instead. `plain`: sent as is, nothing to refuse.
   */
  format: "formatted" | "plain";
}

/** What a platform told us, normalized. Built by the adapter; judged by admission. */
export interface PlatformEvent {
  /** The platform's id for this event (Telegram update_id): inbound dedupe key. */
  eventId: string;
  /** The conversation: becomes the session `<channel>:<chatId>` (a thread is its own chat). */
  chatId: string;
  /** Said by the platform, never guessed from an id. */
  chatType: ChatType;
  senderId: string;
  senderName?: string;
  senderIsBot: boolean;
  /**
   * More ids the allowlist may name for this sender, beyond the sender and chat ids: the groups
   * they belong to, each with its kind (`guild:<id>`, `role:<id>`, `channel:<id>` on Discord).
   */
  scopes?: string[];
  text: string;
  /** The bot was @mentioned (by its own id or username, exactly; not `@everyone`). */
  mentionsBot: boolean;
  /** The message replies to one of the bot's messages. */
  repliesToBot: boolean;
  /** The platform's id of this message, to thread the reply to it. */
  platformMessageId: string;
  media: Media[];
  receivedAt: number;
  /** Platform details for the agent's context (a thread's parent chat, say); kept in the message's metadata. */
  metadata?: Record<string, unknown>;
}

/** Why admission dropped an event without an answer. */
export type IgnoredReason =
  | "bot" // sent by a bot
  | "group-off" // groupPolicy is off
  | "not-addressed" // a group message that neither mentions the bot nor replies to it
  | "not-allowed" // not in allowFrom, not approved (and no pairing: a group, or pairing is off)
  | "pairing-pending" // a stranger whose code was sent already and is still valid
  | "rate-limited" // over the limit, notice already sent this window
  | "empty"; // no text and no media

/** What admission did with an event, for adapters that answer their platform with it, tests and metrics. */
export type AdmissionOutcome =
  | "published" // queued on the bus for a worker
  | "duplicate" // the same platform event came before (a redelivery)
  | "pairing" // a stranger got a pairing code
  | "rate-limited" // over the limit; the notice was sent
  | "voice-refused" // only a voice note that was not transcribed; the sender was told why
  | "command:stop"
  | "command:help"
  | "command:usage"
  | `ignored:${IgnoredReason}`;

/** Takes one event; resolves once admission is done with it, with what admission did. */
export type EventSink = (event: PlatformEvent) => Promise<AdmissionOutcome>;

export interface RateLimit {
  /** Messages a sender may send in a burst, refilled evenly over `perMs`. */
  messages: number;
  perMs: number;
}

/** Who may talk to the bot on a channel, and when it answers. */
export interface AdmissionPolicy {
  /**
   * Sender ids, chat ids and scopes (see PlatformEvent.scopes) let in. EMPTY DENIES everyone
   * except senders approved through pairing.
   */
  allowFrom: string[];
  /** In groups and threads: answer only when mentioned or replied to (`mention`), always (`all`), never (`off`). */
  groupPolicy: "mention" | "all" | "off";
  /**
   * In groups and threads: `labelled` (default) puts who spoke and how the bot is addressed on every
   * message (InboundMessage.group), from the event's own fields; `off` leaves it out.
   */
  groupContext?: GroupContextSetting;
  /**
   * Every sender is let in. Only for channels whose users proved who they are before an event
   * exists (the web page and the terminal: the API token, the local user); never a platform's.
   */
  open?: boolean;
  /**
   * Strangers in private chats get a pairing code for the operator to approve. Default true. Off,
   * they are ignored; senders approved earlier stay admitted until revoked.
   */
  pairing?: boolean;
  /** How long a pairing code is valid. Default 1 h. */
  pairingTtlMs?: number;
  /**
   * Per-sender limit. Default 10 messages per minute. `false`: none, for channels whose sender ids
   * are the client's own word (the web page's).
   */
  rateLimit?: RateLimit | false;
}

export interface SendOptions {
  /** Platform message id to reply to (threading). */
  replyTo?: string;
  /** `formatted`: text is already rendered in the channel's markup; `plain`: send as is, no parsing. */
  format: "formatted" | "plain";
  /** What kind of chat it goes to, when the message said (private chats may stream as drafts). */
  chatType?: ChatType;
  /**
   * Stable for one chunk of one bus message, also when a redelivery or a re-run turn sends it
   * again: platforms that take an idempotency key (Discord's nonce, Feishu's uuid) show it once.
   */
  idempotencyKey?: string;
  /**
   * What this send carries, when the dispatcher was asked to say (`annotateSends`): for adapters
   * that show more than the text (the terminal, the web page). Absent on draft messages.
   */
  outbound?: OutboundPart;
}

/** One chunk of a bus message, as the dispatcher puts it on the platform. */
export interface OutboundPart {
  /** The bus message's id. A turn's reply carries the id its drafts streamed under (draftIdOf). */
  messageId: string;
  /** `final`: a reply (or a message the agent sent mid-turn); `notice`: a tool-call line. */
  kind: "final" | "notice";
  /** This chunk's index, and how many chunks the message was split into. */
  chunk: number;
  chunks: number;
  /**
   * The inbound message ids this message answers (its `metadata.answers`): set on the reply that
   * ends a turn, empty on notices and mid-turn messages.
   */
  answers: string[];
  /** The bus message's metadata (task progress on notices, say). */
  metadata: Record<string, unknown>;
}

/**
 * A platform connector. Methods throw ChannelError (with `retryAfterMs` for rate limits and
 * `kind: "formatting"` when the platform rejects the markup).
 */
export interface ChannelAdapter {
  /** Channel name on the bus, e.g. `telegram`. */
  readonly name: string;
  readonly capabilities: ChannelCapabilities;
  /** Start receiving (polling, a socket or a webhook); every event goes to `sink`, in order per chat. */
  start(sink: EventSink): Promise<void>;
  stop(): Promise<void>;
  /** Send a message; resolves with the platform's id of the message it created. */
  send(chatId: string, text: string, options: SendOptions): Promise<{ platformMessageId: string }>;
  /** Replace the text of a message sent before (edit-style streaming). */
  edit(chatId: string, platformMessageId: string, text: string, options: SendOptions): Promise<void>;
  /**
   * The message a reply streamed into (edit streaming) now shows the reply's final first chunk,
   * `text`: edited in, or already shown by the last draft (then no edit is sent). For platforms
   * that mark a streamed message as in progress (DingTalk's AI card): mark it done. Called once
   * per streamed reply, best effort.
   */
  finishStream?(chatId: string, platformMessageId: string, text: string): Promise<void>;
  /**
   * Show a streaming draft (Telegram sendMessageDraft); only when capabilities.streaming is `draft`
   * and the chat is private. `draftId` is a number derived from `replyId`, the id the final carries.
   */
  draft?(chatId: string, draftId: number, text: string, replyId: string): Promise<void>;
  /**
   * Renders the model's Markdown for this platform (Telegram's HTML subset, Discord's Markdown).
   * Never throws. Absent: the text as is, `plain`.
   */
  render?(markdown: string): RenderedText;
  /**
   * The length the platform counts for `markdown` once rendered, for splitting a reply into
   * messages that fit `maxMessageLength`. Absent: the rendered text's length.
   */
  measure?(markdown: string): number;
  /**
   * How many platform calls sending (or, `edit`, editing in) `text` makes, when one send can make
   * several (Feishu splits a final over cards): the platform's budgets take that many. Default 1.
   */
  callsFor?(text: string, options: SendOptions, edit: boolean): number;
  /**
   * Tells the runtime when the platform connection drops and when it is back, after start()
   * resolved (a socket that reconnects by itself, a poll that keeps failing): the channel shows
   * `degraded` meanwhile. Report a change once, not every retry. Returns the unsubscribe.
   */
  watchConnection?(listener: (change: { connected: boolean; reason?: string }) => void): () => void;
  /** Show "typing…". Best effort. */
  typing(chatId: string): Promise<void>;
  /** The bot's own username once known (a leading `@username` is stripped from what the agent reads). */
  botUsername?(): string | undefined;
  /**
   * Asks the platform whether the credentials work, receiving nothing (`countbot doctor`):
   * resolves with who the bot is, throws ChannelError saying why not.
   */
  probe?(): Promise<string>;
}

/** A platform's HTTP callback, served outside the API's bearer token: it carries its own proof. */
export interface ChannelWebhook {
  /** Path on the gateway's HTTP server, e.g. `/telegram/webhook`. */
  path: string;
  /**
   * Verifies the request (secret header, signature) BEFORE it parses the raw body, then hands it
   * on. `body` is sent back as JSON (a challenge answer, say).
   */
  handle(request: { headers: IncomingHttpHeaders; rawBody: Buffer }): Promise<{ status: number; body?: unknown }>;
}

/** What a plugin gets to build its channel. */
export interface ChannelDependencies {
  logger: Logger;
  /** The deployment's data directory; a channel keeps its files under `<dataDir>/media/<name>` and the like. */
  dataDir: string;
  /**
   * Fan-out to every gateway, for channels whose users hold a connection to one gateway (web
   * sockets), and the declaration of which chats can see drafts (`draftsWatchedPerChat`).
   */
  bus: BusSignals & Pick<GatewayBus, "watchDrafts">;
  /**
   * This channel's log of the events its users must not miss while away (the web page's finals),
   * per chat: in Redis when scaled out, so it survives a gateway restart and every gateway shares it.
   * The gateway always passes it; absent (a test building one plugin), the channel keeps them in memory.
   */
  events?: ChatEventLog;
  /** Clock and ids, injected for tests. */
  now?: () => number;
  newId?: () => string;
}

/** A built channel: the adapter and how the shared runtime should treat it. */
export interface ChannelInstance {
  adapter: ChannelAdapter;
  policy: AdmissionPolicy;
  /** Platform callbacks (webhook mode). */
  webhook?: ChannelWebhook;
  /** Routes behind the API's bearer token (the web page's message POST and socket). */
  routes?: (scope: FastifyInstance) => void;
  /**
   * Names the platform account for the leader lease: among several gateways exactly one connects
   * it and delivers its replies. A hash of the token, never the token. Absent: every gateway runs
   * the channel (its users connect to one of them: the web page).
   */
  account?: string;
  /**
   * The platform's send budgets for this account (its `quotas.ts`, with the section's `limits`
   * applied: `withLimits`): every call the runtime makes waits for room in them, over Redis shared
   * by every gateway of the bot. Absent: paced by `minSendIntervalMs` only (the web page, the terminal).
   */
  quotas?: PlatformQuotas;
  /** The id of the inbound message made of an event. Default: a random UUID. */
  inboundIdOf?: (event: PlatformEvent) => string;
  /** Send tool-call notices to the chat. Default false. */
  showNotices?: boolean;
  /** Also send transient notices (a team agent's streamed text): for pages that show progress live. Default false. */
  showTransientNotices?: boolean;
  /** Tell the adapter what each send is (SendOptions.outbound). Default false. */
  annotateSends?: boolean;
  /**
   * How a team run started in one of its chats shows progress: one status message edited in place
   * (`status-message`, see team-status.ts) or nothing (`off`, the default for channels that show
   * notices themselves).
   */
  teamProgress?: TeamProgressSetting;
}

/**
 * A platform, as `channels/index.ts` lists it. Its config section `channels.<name>` is validated by
 * `configSchema` (the `channels` schema is assembled from the plugins'), and `create` runs only
 * when the section says `enabled: true`.
 *
 * Every process loads the registry (the config is checked against it), so a plugin module stays
 * cheap: its schema, its policy and a `create` that imports the adapter, and with it the
 * platform's SDK, dynamically. A process whose config enables no Discord never loads discord.js.
 */
export interface ChannelPlugin<Config extends ChannelConfig = ChannelConfig> {
  /** Channel name on the bus and config key, e.g. `telegram`. */
  readonly name: string;
  /** One line for the generated config reference. */
  readonly description: string;
  readonly configSchema: z.ZodType<Config>;
  /** Environment variables that set a field of this section, e.g. `{ TELEGRAM_BOT_TOKEN: "token" }`. */
  readonly environment?: Readonly<Record<string, string>>;
  /**
   * Builds the channel, importing its adapter (and SDK) on the way. Rejects with ConfigError naming
   * the field (`channels.<name>.token`) when it cannot.
   */
  create(config: Config, dependencies: ChannelDependencies): Promise<ChannelInstance>;
  /**
   * The admission policy a section asks for, alone: a config reload applies it to the running
   * channel without reconnecting. Absent: the policy changes only with a restart.
   */
  policy?(config: Config): AdmissionPolicy;
  /** The path of the HTTP callback a section is served on, when it takes one: config loading refuses two accounts on one path. */
  webhookPath?(config: Config): string | undefined;
}

/** What every channel's config section has. */
export interface ChannelConfig {
  enabled: boolean;
}

/** Declares a plugin with its config type inferred from the schema. */
export function defineChannel<Config extends ChannelConfig>(plugin: ChannelPlugin<Config>): ChannelPlugin<Config> {
  return plugin;
}

/**
 * One key from several parts that may contain any character (chat ids, client-chosen ids): each
 * part is prefixed with its length, so `a:b` + `1` and `a` + `b:1` can never give the same key,
 * as a plain `${chatId}:${id}` would. Use it wherever a dedupe key joins user-supplied strings.
 */
export function compositeKey(...parts: string[]): string {
  return parts.map((part) => `${part.length}:${part}`).join("");
}
