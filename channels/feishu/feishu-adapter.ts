/**
 * The Feishu / Lark channel: a ChannelAdapter over the open platform, through @larksuiteoapi/node-sdk.
 *
 * - Inbound: the long connection (long-connection.ts) or the webhook (webhook-handler.ts); only
 *   `im.message.receive_v1`. Each event is acknowledged within Feishu's 3 s: the handler answers
 *   once admission published it, or after `ackBudgetMs` while a slow download goes on (tracked, so
 *   stop() waits for it). Duplicates: the event's `eventId` is the message_id, deduped by the bus
 *   (Redis `seen:` keys, a day) across restarts; in-flight and recent message ids and event ids are
 *   also dropped here, and so is a message older than `maxEventAgeMs` (its `seen:` key may be gone).
 * - Outbound: an interactive card with the Markdown, sent as a reply to the message it answers
 *   (`reply_in_thread` inside topic threads), or created in the chat; streaming updates that card
 *   (PATCH). Every send carries a `uuid` derived from the dispatcher's idempotency key, so a retried
 *   or re-run send shows once. Card limits are checked first: a text over them is split over several
 *   cards; a card Feishu refuses falls back to a post (Markdown), then to plain text.
 * - Errors: both of the SDK's failure shapes (thrown HTTP 400/429, returned `code ≠ 0`) become
 *   ChannelError kinds; rate limits carry `x-ogw-ratelimit-reset` for the dispatcher to wait out.
 * - The SDK's token cache is process-wide unless a client brings its own: each adapter does.
 * - Senders' names: Feishu's events carry only ids, so in groups the sender's name is asked of the
 *   contact API (needs the app's contact read permission), cached for an hour, an unknown one for
 *   ten minutes; a lookup that fails or takes over 1.5 s leaves the name out (the label shows the id).
 *
 * Capabilities: Feishu allows 5 messages a second per chat (and 10 updates a second per streaming
 * card), so `minSendIntervalMs` is 200 and drafts update at most twice a second; the app's budgets
 * (quotas.ts) are the send governor's. Feishu has no typing indicator
 * for bots: typing() does nothing.
 */
import { createHash } from "node:crypto";
import type { Readable } from "node:stream";
import * as lark from "@larksuiteoapi/node-sdk";
import type { Logger } from "pino";
import { type ChannelAdapter, type ChannelCapabilities, type EventSink, ExpiringMap, ExpiringSet, KeyedLanes, type SendOptions } from "../../src/gateway/kit/index.js";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { type MessageBody, fitCards, markdownCard, markdownPost, plainText } from "./cards.js";
import { MESSAGE_RECEIVED, type MessageEvent, MessageEventSchema } from "./event-schema.js";
import { checked, feishuScrubber, toChannelError } from "./feishu-errors.js";
import { type BotIdentity, splitChatId, toPlatformEvent } from "./inbound-event.js";
import { APP_ID_PATTERN } from "./config.js";
import { type LongConnection, createLongConnection, sdkLogger } from "./long-connection.js";
import { createResourceDownloader } from "./resource-download.js";
import { type WebhookHandler, createWebhookHandler } from "./webhook-handler.js";

export type { BotIdentity } from "./inbound-event.js";

export const feishuCapabilities: ChannelCapabilities = {
  maxMessageLength: 8_000,
  streaming: "edit",
  draftIntervalMs: 500,
  minSendIntervalMs: 200,
};

export interface FeishuAdapterOptions {
  appId: string;
  /** Secret: never logged, scrubbed from errors. */
  appSecret: string;
  /** Open platform root URL, e.g. https://open.feishu.cn. */
  domain: string;
  mode: "longConnection" | "webhook";
  /** Webhook mode: signs requests and decrypts bodies (secret). */
  encryptKey?: string;
  verificationToken?: string;
  groupSessionScope: "chat" | "thread";
  maxImageBytes: number;
  maxFileBytes: number;
  downloadDir: string;
  logger: Logger;
  now?: () => number;
  silenceTimeoutMs?: number;
  /** Longest an event waits for its acknowledgement. Default 2.5 s (Feishu wants one within 3 s). */
  ackBudgetMs?: number;
  /** Messages older than this are dropped, not answered. Default 12 h (the bus's dedupe holds for 24 h). */
  maxEventAgeMs?: number;
}

export interface FeishuAdapter extends ChannelAdapter {
  /** The webhook endpoint (webhook mode); 503 until start() and after stop(). */
  readonly webhook: WebhookHandler;
  /** Who the bot is; known once start() resolved. */
  readonly identity: BotIdentity | undefined;
  /** Long-connection reconnects so far. */
  readonly reconnects: number;
}

/** Feishu's uuid (at most 50 characters) for a send: a UUID-shaped hash of the idempotency key and the part. */
export function uuidOf(idempotencyKey: string, part: number): string {
  const hex = createHash("sha256").update(`${idempotencyKey}/${part}`).digest("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

const DAY_MS = 24 * 60 * 60 * 1000;
/** Longest an event waits for its sender's name. */
const NAME_LOOKUP_MS = 1_500;

export function createFeishuAdapter(options: FeishuAdapterOptions): FeishuAdapter {
  const { appId, appSecret, logger } = options;
  if (!appId || !appSecret) throw new ChannelError("the Feishu channel needs an app id and an app secret", "feishu");
  if (options.mode === "webhook" && !options.encryptKey) throw new ChannelError("Feishu webhook mode needs the encrypt key", "feishu");
  const now = options.now ?? Date.now;
  const scrub = feishuScrubber([appSecret, options.encryptKey, options.verificationToken]);
  const ackBudgetMs = options.ackBudgetMs ?? 2_500;
  const maxEventAgeMs = options.maxEventAgeMs ?? DAY_MS / 2;
  const client = new lark.Client({
    appId,
    appSecret,
    domain: options.domain,
    // The SDK's default cache is one for the whole process: each client gets its own.
    cache: new lark.DefaultCache(),
    logger: sdkLogger(logger, scrub),
    loggerLevel: lark.LoggerLevel.error,
  });

  async function call<T>(method: string, run: () => Promise<T>): Promise<T> {
    try {
      return checked(await run());
    } catch (error) {
      throw toChannelError(error, method, scrub);
    }
  }

  const downloader = createResourceDownloader({
    fetchResource: async (resource) => {
      const answer = await call("messageResource.get", () =>
        client.im.v1.messageResource.get({ path: { message_id: resource.messageId, file_key: resource.fileKey }, params: { type: resource.type } }),
      );
      return { stream: answer.getReadableStream() as Readable, headers: (answer.headers ?? {}) as Record<string, unknown> };
    },
    downloadDir: options.downloadDir,
    maxImageBytes: options.maxImageBytes,
    maxFileBytes: options.maxFileBytes,
    logger,
  });

  let identity: BotIdentity | undefined;
  let sink: EventSink | undefined;
  let running = false;
  let lifetime = new AbortController();
  let connection: LongConnection | undefined;
  /** Message ids (and event ids) published recently, or in flight: a redelivery is dropped before it downloads anything. */
  const recent = new ExpiringSet(DAY_MS / 24, now);
  const taking = new Set<string>();
  /** Messages the bot sent (replies to the bot), and the user messages that were in a thread. */
  const sentByBot = new ExpiringSet(DAY_MS, now);
  const inThread = new ExpiringSet(DAY_MS, now);
  /** In-flight events, so stop() waits for them; and each chat's tail, so a chat's events stay in order. */
  const inFlight = new Set<Promise<void>>();
  const chats = new KeyedLanes();

  /** Display names by open_id, and the ids the contact API had no name for (asked again sooner). */
  const names = new ExpiringMap<string>(60 * 60 * 1000, now, 10_000);
  const nameless = new ExpiringSet(10 * 60 * 1000, now);
  async function senderName(openId: string): Promise<string | undefined> {
    if (!openId.startsWith("ou_") || nameless.has(openId)) return undefined;
    const known = names.get(openId);
    if (known) return known;
    const lookup = call("contact.user.get", () =>
      client.request<{ code: number; msg: string; data?: { user?: { name?: string } } }>({ method: "GET", url: `/open-apis/contact/v3/users/${encodeURIComponent(openId)}`, params: { user_id_type: "open_id" } }),
    ).then(
      (answer) => answer.data?.user?.name?.trim() ?? "",
      (error: unknown) => {
        logger.debug({ channel: "feishu", error: errorMessage(error) }, "feishu sender name lookup failed");
        return "";
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), NAME_LOOKUP_MS)));
    const name = await Promise.race([lookup, timeout]).finally(() => clearTimeout(timer));
    if (name === undefined) return undefined; // slow: not remembered, asked again next time
    if (name === "") nameless.add(openId);
    else names.set(openId, name);
    return name || undefined;
  }

  async function handOn(event: MessageEvent, signal: AbortSignal): Promise<void> {
    const platformEvent = await toPlatformEvent(
      event,
      { bot: identity, scope: options.groupSessionScope, download: downloader.download, sentByBot: (id) => sentByBot.has(id), now },
      signal,
    );
    if (platformEvent.chatType !== "private" && !platformEvent.senderIsBot) {
      const name = await senderName(platformEvent.senderId);
      if (name) platformEvent.senderName = name;
    }
    if (signal.aborted || !sink) return;
    const outcome = await sink(platformEvent);
    logger.debug({ channel: "feishu", chatId: platformEvent.chatId, messageId: event.message.message_id, eventId: event.event_id, outcome }, "feishu event handled");
  }

  /** Takes one event from either path; resolves when it may be acknowledged. */
  async function receive(raw: Record<string, unknown>): Promise<void> {
    if (raw.event_type !== MESSAGE_RECEIVED) return;
    const parsed = MessageEventSchema.safeParse(raw);
    if (!parsed.success) {
      logger.warn({ channel: "feishu", eventId: raw.event_id, error: parsed.error.issues[0]?.message }, "feishu event not understood; skipped");
      return;
    }
    const event = parsed.data;
    const { message } = event;
    const fields = { channel: "feishu", messageId: message.message_id, eventId: event.event_id };
    const ids = [message.message_id, `event:${event.event_id}`];
    if (ids.some((id) => recent.has(id) || taking.has(id))) return logger.debug(fields, "feishu event redelivered; dropped");
    const createdAt = Number(message.create_time ?? event.create_time);
    if (Number.isFinite(createdAt) && now() - createdAt > maxEventAgeMs) {
      return logger.warn({ ...fields, ageMs: now() - createdAt }, "feishu message too old to answer; dropped");
    }
    for (const id of ids) taking.add(id);
    if (message.thread_id) inThread.add(message.message_id);
    const signal = lifetime.signal;
    const work = chats.run(message.chat_id, () => handOn(event, signal));
    // Done: remembered. Failed: forgotten, so that Feishu's redelivery is taken.
    const tracked = work
      .then(() => ids.forEach((id) => recent.add(id)), () => undefined)
      .finally(() => {
        for (const id of ids) taking.delete(id);
        inFlight.delete(tracked);
      });
    inFlight.add(tracked);
    let timer: NodeJS.Timeout | undefined;
    const budget = new Promise<"budget">((resolve) => {
      timer = setTimeout(() => resolve("budget"), ackBudgetMs);
    });
    try {
      const outcome = await Promise.race([work.then(() => "done" as const), budget]);
      if (outcome === "budget") {
        logger.info(fields, "feishu event still in progress; acknowledged to keep within Feishu's 3 s");
        work.catch((error: unknown) => logger.error({ ...fields, error: errorMessage(error) }, "feishu event failed after its acknowledgement"));
      }
    } finally {
      clearTimeout(timer);
    }
  }

  const webhook: WebhookHandler =
    options.mode === "webhook" && options.encryptKey
      ? createWebhookHandler({
          encryptKey: options.encryptKey,
          verificationToken: options.verificationToken,
          accepting: () => running,
          handle: receive,
          logger,
          now,
        })
      : async () => ({ status: 404, body: { error: "the Feishu channel runs a long connection, not a webhook" } });

  /** Sends one message: a reply to `replyTo` when given, otherwise into the chat (or the thread). */
  async function post(chatId: string, body: MessageBody, sendOptions: SendOptions, uuid: string | undefined): Promise<string> {
    const target = splitChatId(chatId);
    const replyTo = sendOptions.replyTo ?? target.threadRoot;
    const data = { msg_type: body.msgType, content: body.content, ...(uuid ? { uuid } : {}) };
    const answer = replyTo
      ? await call("message.reply", () =>
          client.im.v1.message.reply({ path: { message_id: replyTo }, data: { ...data, reply_in_thread: target.threadRoot !== undefined || inThread.has(replyTo) } }),
        )
      : await call("message.create", () => client.im.v1.message.create({ params: { receive_id_type: "chat_id" }, data: { ...data, receive_id: target.chatId } }));
    const messageId = answer.data?.message_id;
    if (!messageId) throw new ChannelError("feishu send answered without a message_id", "feishu");
    sentByBot.add(messageId);
    return messageId;
  }

  /** A card; when Feishu refuses the card itself, the same text as a post, then as plain text. */
  async function sendPart(chatId: string, text: string, sendOptions: SendOptions, uuid: string | undefined): Promise<string> {
    const bodies = [markdownCard(text), markdownPost(text), plainText(text)];
    for (let index = 0; ; index++) {
      try {
        // Each fallback is a different message: it gets its own uuid.
        return await post(chatId, bodies[index]!, sendOptions, uuid && index > 0 ? uuidOf(uuid, index) : uuid);
      } catch (error) {
        const kind = error instanceof ChannelError ? error.kind : "other";
        if (index === bodies.length - 1 || (kind !== "formatting" && kind !== "too-long")) throw error;
        logger.warn({ channel: "feishu", chatId, error: errorMessage(error), fallback: bodies[index + 1]!.msgType }, "feishu refused the message; sending it another way");
      }
    }
  }

  /**
   * A streamed draft shows only its first card; a final (or a gateway reply) is split over as many
   * as it needs. The dispatcher keys the message a draft starts `<reply id>#draft`, and edits of it
   * carry no `outbound` (finals do: the plugin asks for annotated sends).
   */
  const isDraft = (sendOptions: SendOptions, editing: boolean) =>
    editing ? sendOptions.outbound === undefined : (sendOptions.idempotencyKey?.endsWith("#draft") ?? false);

  return {
    name: "feishu",
    capabilities: feishuCapabilities,
    webhook,
    get identity() {
      return identity;
    },
    get reconnects() {
      return connection?.reconnects ?? 0;
    },
    botUsername: () => identity?.name,
    // A final over the card limits goes out as several cards: each is a call the budgets count.
    callsFor: (text, sendOptions, editing) => (isDraft(sendOptions, editing) ? 1 : fitCards(text).length),

    async probe() {
      const info = await call("bot.info", () => client.request<{ code: number; msg: string; bot?: { open_id?: string; app_name?: string } }>({ method: "GET", url: "/open-apis/bot/v3/info" }));
      if (!info.bot?.open_id) throw new ChannelError("feishu bot info has no open_id: is the app's bot capability on?", "feishu");
      return `${info.bot.app_name ?? "bot"} (${info.bot.open_id})`;
    },

    async start(eventSink) {
      if (running) throw new ChannelError("the Feishu adapter is already running", "feishu");
      if (options.mode === "longConnection" && !APP_ID_PATTERN.test(appId)) {
        // WSClient.start() would log one line and never connect.
        throw new ChannelError("the Feishu long connection needs an app id of the form cli_ + 16 hex characters", "feishu");
      }
      const info = await call("bot.info", () => client.request<{ code: number; msg: string; bot?: { open_id?: string; app_name?: string } }>({ method: "GET", url: "/open-apis/bot/v3/info" }));
      if (!info.bot?.open_id) throw new ChannelError("feishu bot info has no open_id: is the app's bot capability on?", "feishu");
      identity = { openId: info.bot.open_id, name: info.bot.app_name ?? "bot" };
      sink = eventSink;
      lifetime = new AbortController();
      running = true;
      if (options.mode === "longConnection") {
        connection = createLongConnection({ appId, appSecret, domain: options.domain, onMessage: receive, logger, silenceTimeoutMs: options.silenceTimeoutMs, now });
        try {
          await connection.start();
        } catch (error) {
          running = false;
          throw error;
        }
      }
      logger.info({ channel: "feishu", mode: options.mode, bot: identity.name }, "feishu channel started");
    },

    async stop() {
      if (!running) return;
      running = false;
      await connection?.stop();
      connection = undefined;
      await Promise.all(inFlight);
      lifetime.abort();
      logger.info({ channel: "feishu" }, "feishu channel stopped");
    },

    async send(chatId, text, sendOptions) {
      const parts = fitCards(text);
      const shown = isDraft(sendOptions, false) ? parts.slice(0, 1) : parts;
      const key = sendOptions.idempotencyKey;
      const first = await sendPart(chatId, shown.length < parts.length ? `${shown[0]}\n…` : shown[0]!, sendOptions, key ? uuidOf(key, 0) : undefined);
      for (let index = 1; index < shown.length; index++) {
        // Like the dispatcher's later chunks: into the chat (or the thread), not another reply.
        await sendPart(chatId, shown[index]!, { ...sendOptions, replyTo: undefined }, key ? uuidOf(key, index) : undefined);
      }
      return { platformMessageId: first };
    },

    async edit(chatId, platformMessageId, text, sendOptions) {
      const parts = fitCards(text);
      const draft = isDraft(sendOptions, true);
      const head = draft && parts.length > 1 ? `${parts[0]}\n…` : parts[0]!;
      await call("message.patch", () => client.im.v1.message.patch({ path: { message_id: platformMessageId }, data: { content: markdownCard(head).content } }));
      if (draft) return;
      // A final that outgrew the card: the rest follows as more cards in the chat (or the thread).
      const key = sendOptions.idempotencyKey ?? `edit:${platformMessageId}`;
      for (let index = 1; index < parts.length; index++) {
        await sendPart(chatId, parts[index]!, { ...sendOptions, replyTo: undefined }, uuidOf(key, index));
      }
    },

    async typing() {
      // Feishu shows bots no typing indicator.
    },
  };
}
