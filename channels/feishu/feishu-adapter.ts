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
 * card); the send governor keeps those and the app's budgets (quotas.ts), so there is no
 * `minSendIntervalMs` (a floor of 200 ms spread a busy group's five a second over the second,
 * behind the app's other chats), and drafts update at most twice a second. Feishu has no typing
 * indicator for bots: typing() does nothing.
 */
import type { Readable } from "node:stream";
import * as lark from "@larksuiteoapi/node-sdk";
import type { Logger } from "pino";
import { type ChannelAdapter, type ChannelCapabilities, ExpiringSet } from "../../src/gateway/kit/index.js";
import { ChannelError } from "../../src/errors.js";
import { fitCards } from "./cards.js";
import { APP_ID_PATTERN } from "./config.js";
import { EventIntake } from "./event-intake.js";
import { checked, feishuScrubber, toChannelError } from "./feishu-errors.js";
import type { BotIdentity } from "./inbound-event.js";
import { type LongConnection, createLongConnection, sdkLogger } from "./long-connection.js";
import { type FeishuCall, FeishuSender, isDraft, uuidOf } from "./message-sender.js";
import { createResourceDownloader } from "./resource-download.js";
import { SenderNames } from "./sender-names.js";
import { type WebhookHandler, createWebhookHandler } from "./webhook-handler.js";

export { uuidOf };
export type { BotIdentity } from "./inbound-event.js";

export const feishuCapabilities: ChannelCapabilities = {
  maxMessageLength: 8_000,
  streaming: "edit",
  draftIntervalMs: 500,
  minSendIntervalMs: 0,
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

const DAY_MS = 24 * 60 * 60 * 1000;

type BotInfo = { code: number; msg: string; bot?: { open_id?: string; app_name?: string } };

/** The SDK client with a token cache of its own (the SDK's default one is shared by the whole process) and a scrubbing logger. */
function createClient(options: FeishuAdapterOptions, scrub: (text: string) => string): lark.Client {
  return new lark.Client({
    appId: options.appId,
    appSecret: options.appSecret,
    domain: options.domain,
    cache: new lark.DefaultCache(),
    logger: sdkLogger(options.logger, scrub),
    loggerLevel: lark.LoggerLevel.error,
  });
}

/** The inbound side: event intake with its downloads and sender names over the SDK client. */
function createIntake(options: FeishuAdapterOptions, client: lark.Client, call: FeishuCall, shared: { sentByBot: ExpiringSet; inThread: ExpiringSet; now: () => number }): EventIntake {
  const { logger } = options;
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
  const lookupName = async (openId: string) => {
    const answer = await call("contact.user.get", () =>
      client.request<{ code: number; msg: string; data?: { user?: { name?: string } } }>({ method: "GET", url: `/open-apis/contact/v3/users/${encodeURIComponent(openId)}`, params: { user_id_type: "open_id" } }),
    );
    return answer.data?.user?.name;
  };
  return new EventIntake({
    groupSessionScope: options.groupSessionScope,
    download: downloader.download,
    senderNames: new SenderNames(lookupName, logger, shared.now),
    sentByBot: shared.sentByBot,
    inThread: shared.inThread,
    logger,
    now: shared.now,
    ackBudgetMs: options.ackBudgetMs ?? 2_500,
    maxEventAgeMs: options.maxEventAgeMs ?? DAY_MS / 2,
  });
}

/** The webhook endpoint in webhook mode; in long-connection mode a 404 that says why. */
function createWebhook(options: FeishuAdapterOptions, accepting: () => boolean, handle: (raw: Record<string, unknown>) => Promise<void>, now: () => number): WebhookHandler {
  if (options.mode !== "webhook" || !options.encryptKey) {
    return async () => ({ status: 404, body: { error: "the Feishu channel runs a long connection, not a webhook" } });
  }
  return createWebhookHandler({ encryptKey: options.encryptKey, verificationToken: options.verificationToken, accepting, handle, logger: options.logger, now });
}

/** Asks who the bot is; refuses an app whose bot capability is off. */
async function botInfo(client: lark.Client, call: FeishuCall): Promise<BotIdentity> {
  const info = await call("bot.info", () => client.request<BotInfo>({ method: "GET", url: "/open-apis/bot/v3/info" }));
  if (!info.bot?.open_id) throw new ChannelError("feishu bot info has no open_id: is the app's bot capability on?", "feishu");
  return { openId: info.bot.open_id, name: info.bot.app_name ?? "bot" };
}

export function createFeishuAdapter(options: FeishuAdapterOptions): FeishuAdapter {
  const { appId, appSecret, logger } = options;
  if (!appId || !appSecret) throw new ChannelError("the Feishu channel needs an app id and an app secret", "feishu");
  if (options.mode === "webhook" && !options.encryptKey) throw new ChannelError("Feishu webhook mode needs the encrypt key", "feishu");
  const now = options.now ?? Date.now;
  const scrub = feishuScrubber([appSecret, options.encryptKey, options.verificationToken]);
  const client = createClient(options, scrub);
  const call: FeishuCall = async (method, run) => {
    try {
      return checked(await run());
    } catch (error) {
      throw toChannelError(error, method, scrub);
    }
  };
  /** Messages the bot sent (replies to the bot), and the user messages that were in a thread. */
  const sentByBot = new ExpiringSet(DAY_MS, now);
  const inThread = new ExpiringSet(DAY_MS, now);
  const intake = createIntake(options, client, call, { sentByBot, inThread, now });
  const sender = new FeishuSender(client, call, logger, sentByBot, inThread);
  let running = false;
  let connection: LongConnection | undefined;

  return {
    name: "feishu",
    capabilities: feishuCapabilities,
    webhook: createWebhook(options, () => running, intake.receive, now),
    get identity() {
      return intake.identity;
    },
    get reconnects() {
      return connection?.reconnects ?? 0;
    },
    botUsername: () => intake.identity?.name,
    // A final over the card limits goes out as several cards: each is a call the budgets count.
    callsFor: (text, sendOptions, editing) => (isDraft(sendOptions, editing) ? 1 : fitCards(text).length),

    async probe() {
      const identity = await botInfo(client, call);
      return `${identity.name} (${identity.openId})`;
    },

    async start(eventSink) {
      if (running) throw new ChannelError("the Feishu adapter is already running", "feishu");
      if (options.mode === "longConnection" && !APP_ID_PATTERN.test(appId)) {
        // WSClient.start() would log one line and never connect.
        throw new ChannelError("the Feishu long connection needs an app id of the form cli_ + 16 hex characters", "feishu");
      }
      intake.identity = await botInfo(client, call);
      intake.sink = eventSink;
      intake.lifetime = new AbortController();
      running = true;
      if (options.mode === "longConnection") {
        connection = createLongConnection({ appId, appSecret, domain: options.domain, onMessage: intake.receive, logger, silenceTimeoutMs: options.silenceTimeoutMs, now });
        try {
          await connection.start();
        } catch (error) {
          running = false;
          throw error;
        }
      }
      logger.info({ channel: "feishu", mode: options.mode, bot: intake.identity.name }, "feishu channel started");
    },

    async stop() {
      if (!running) return;
      running = false;
      await connection?.stop();
      connection = undefined;
      await intake.drain();
      intake.lifetime.abort();
      logger.info({ channel: "feishu" }, "feishu channel stopped");
    },

    send: (chatId, text, sendOptions) => sender.send(chatId, text, sendOptions),
    edit: (chatId, platformMessageId, text, sendOptions) => sender.edit(chatId, platformMessageId, text, sendOptions),

    async typing() {
      // Feishu shows bots no typing indicator.
    },
  };
}
