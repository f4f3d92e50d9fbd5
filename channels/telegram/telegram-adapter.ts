/**
 * The Telegram channel: a ChannelAdapter over the Bot API, through telegraf's API client.
 *
 * - Inbound: long polling (own getUpdates loop, see polling.ts) or a webhook (see webhook-handler.ts);
 *   only `message` updates are asked for. Text and captions, the largest size of a photo and
 *   documents (downloaded with a size cap into `downloadDir`), mentions, replies to the bot.
 *   Events reach the sink one at a time per chat, in order.
 * - Outbound: sendMessage with parse_mode HTML for `formatted` text and none for `plain`, threaded
 *   with reply_parameters (allow_sending_without_reply, so a deleted original does not lose the
 *   reply); editMessageText ("message is not modified" is a success); sendMessageDraft (Bot API 9.3,
 *   private chats; telegraf 4.16 predates it, so through callApi); sendChatAction typing.
 * - Errors become ChannelError (kind, retryAfterMs) with the bot token scrubbed from every message.
 *
 * Capabilities: Telegram asks bots to stay under one message per second per chat and 20 per minute
 * in a group. `minSendIntervalMs` is the per-chat second; the group minute is left to 429s and their
 * retry_after, which the dispatcher honours. Streaming is `draft`: the dispatcher uses draft() in
 * private chats, where sendMessageDraft works, and edit-style streaming in groups.
 */
import { Telegraf } from "telegraf";
import type { Logger } from "pino";
import { type ChannelAdapter, type ChannelCapabilities, type EventSink, KeyedLanes, type PlatformEvent, type SendOptions, createScrubber } from "../../src/gateway/kit/index.js";
import { ChannelError } from "../../src/errors.js";
import { createFileDownloader } from "./file-download.js";
import { type BotIdentity, toPlatformEvent } from "./inbound-event.js";
import { type Polling, startPolling } from "./polling.js";
import { isNotModified, toChannelError } from "./telegram-errors.js";
import { renderTelegramHtml, telegramRenderedLength } from "./render-html.js";
import { TelegramFileSchema, type TelegramUpdate, TelegramUpdateSchema } from "./update-schema.js";
import { type WebhookHandler, createWebhookHandler } from "./webhook-handler.js";

export { SECRET_HEADER, type WebhookHandler, type WebhookHeaders, type WebhookResult } from "./webhook-handler.js";
export type { BotIdentity } from "./inbound-event.js";

export const telegramCapabilities: ChannelCapabilities = {
  maxMessageLength: 4096,
  streaming: "draft",
  draftIntervalMs: 1_000,
  minSendIntervalMs: 1_000,
};

export interface TelegramWebhookOptions {
  /** Public HTTPS URL Telegram posts updates to; registered with setWebhook on start. */
  url: string;
  /** Sent back by Telegram in `X-Telegram-Bot-Api-Secret-Token` (1-256 of `A-Z a-z 0-9 _ -`). */
  secret: string;
  /** Local path the HTTP server serves the handler at (behind a proxy it may differ from the URL's). */
  path: string;
  /** Called on start with the handler, for the HTTP server to mount at `path`. */
  register?: (handler: WebhookHandler, path: string) => void;
}

export interface TelegramAdapterOptions {
  /** Bot token (secret): never logged, scrubbed from errors. */
  token: string;
  /** Bot API root, for self-hosted Bot API servers and tests. Default https://api.telegram.org. */
  apiRoot?: string;
  mode: "polling" | "webhook";
  /** Required in webhook mode. */
  webhook?: TelegramWebhookOptions;
  /** Photos and documents larger than this become a note in the text instead of media. */
  maxFileBytes: number;
  /** Where downloaded files go. */
  downloadDir: string;
  logger: Logger;
  /** Downloads files (the API calls go through telegraf's own client). Default: global fetch. */
  fetch?: typeof globalThis.fetch;
  /** Clock of `receivedAt`. Default Date.now. */
  now?: () => number;
  /** Long-poll timeout of getUpdates, in seconds. Default 30. */
  pollTimeoutSeconds?: number;
}

export interface TelegramAdapter extends ChannelAdapter {
  draft(chatId: string, draftId: number, text: string): Promise<void>;
  /** The webhook endpoint (webhook mode); answers 503 until start() and after stop(). */
  handleWebhook: WebhookHandler;
  /** Who the bot is; known once start() resolved. */
  readonly identity: BotIdentity | undefined;
  botUsername(): string | undefined;
}

const defaultApiRoot = "https://api.telegram.org";

/** Telegram chat ids are numbers; keep `@channelname` ids as they are. */
function chatIdOf(chatId: string): number | string {
  return /^-?\d+$/.test(chatId) ? Number(chatId) : chatId;
}

function messageIdOf(platformMessageId: string): number {
  const id = Number(platformMessageId);
  if (!Number.isSafeInteger(id)) throw new ChannelError(`not a Telegram message id: ${platformMessageId}`, "telegram", { kind: "not-found" });
  return id;
}

export function createTelegramAdapter(options: TelegramAdapterOptions): TelegramAdapter {
  const { token, logger } = options;
  if (!token) throw new ChannelError("the Telegram channel needs a bot token", "telegram");
  if (options.mode === "webhook" && (!options.webhook?.url || !options.webhook.secret)) {
    throw new ChannelError("Telegram webhook mode needs webhook.url and webhook.secret", "telegram");
  }
  // A root without its trailing slash would lose its last path segment when telegraf resolves `./bot<token>/...` on it.
  const apiRoot = (options.apiRoot ?? defaultApiRoot).replace(/\/*$/, "/");
  const telegram = new Telegraf(token, { telegram: { apiRoot } }).telegram;
  const scrub = createScrubber([token], { replacement: "[token]" });
  const now = options.now ?? Date.now;

  /** Runs one API call; anything it throws comes out as a ChannelError without the token. */
  async function guard<T>(method: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw toChannelError(error, method, scrub);
    }
  }

  /** For methods telegraf 4.16 does not know, and for getUpdates with an abort signal. */
  function callRaw<T>(method: string, payload: Record<string, unknown>, signal?: AbortSignal): Promise<T> {
    const callApi = telegram.callApi.bind(telegram) as unknown as (method: string, payload: object, extra: { signal?: AbortSignal }) => Promise<T>;
    return guard(method, () => callApi(method, payload, signal ? { signal } : {}));
  }

  const downloader = createFileDownloader({
    getFile: async (fileId, signal) => TelegramFileSchema.parse(await callRaw("getFile", { file_id: fileId }, signal)),
    fileUrl: (filePath) => new URL(`./file/bot${token}/${filePath}`, apiRoot).toString(),
    fetch: options.fetch ?? globalThis.fetch,
    downloadDir: options.downloadDir,
    maxFileBytes: options.maxFileBytes,
    logger,
    scrub,
  });

  let identity: BotIdentity | undefined;
  let sink: EventSink | undefined;
  let running = false;
  let polling: Polling | undefined;
  /** Aborts downloads of a stopping adapter. */
  let lifetime = new AbortController();
  /** Webhook mode: a lane per chat, so a chat's events stay in order. */
  const chats = new KeyedLanes();
  const connectionListeners = new Set<(change: { connected: boolean; reason?: string }) => void>();

  async function handleUpdate(update: TelegramUpdate, signal: AbortSignal): Promise<void> {
    const message = update.message;
    if (!message || !identity || !sink) return;
    const event: PlatformEvent = await toPlatformEvent(update.update_id, message, { bot: identity, download: downloader.download, now }, signal);
    if (signal.aborted) throw signal.reason ?? new Error("aborted");
    await sink(event);
  }

  const handleWebhook: WebhookHandler = options.webhook?.secret
    ? createWebhookHandler({
        secret: options.webhook.secret,
        accepting: () => running && options.mode === "webhook",
        handle: (update) => {
          const signal = lifetime.signal;
          return chats.run(String(update.message?.chat.id ?? ""), () => handleUpdate(update, signal));
        },
        logger,
      })
    : async () => ({ status: 404, error: "the Telegram channel has no webhook" });

  async function startPollingMode(): Promise<void> {
    // getUpdates answers 409 while a webhook is set; pending updates stay queued.
    await guard("deleteWebhook", () => telegram.deleteWebhook({ drop_pending_updates: false }));
    polling = startPolling({
      getUpdates: (params, signal) => callRaw<unknown[]>("getUpdates", { ...params, allowed_updates: ["message"] }, signal),
      handle: async (raw, signal) => {
        const parsed = TelegramUpdateSchema.safeParse(raw);
        if (!parsed.success) {
          logger.warn({ channel: "telegram", updateId: (raw as { update_id?: unknown }).update_id, error: parsed.error.issues[0]?.message }, "telegram update not understood; skipped");
          return;
        }
        await handleUpdate(parsed.data, signal);
      },
      timeoutSeconds: options.pollTimeoutSeconds ?? 30,
      logger,
      onConnectionChange: (connected, reason) => {
        for (const listener of connectionListeners) listener({ connected, reason });
      },
    });
  }

  async function startWebhookMode(webhook: TelegramWebhookOptions): Promise<void> {
    webhook.register?.(handleWebhook, webhook.path);
    await guard("setWebhook", () => telegram.setWebhook(webhook.url, { secret_token: webhook.secret, allowed_updates: ["message"] }));
  }

  return {
    name: "telegram",
    capabilities: telegramCapabilities,
    render: (markdown) => ({ text: renderTelegramHtml(markdown), format: "formatted" }),
    measure: telegramRenderedLength,
    handleWebhook,
    get identity() {
      return identity;
    },
    botUsername() {
      return identity?.username;
    },
    watchConnection(listener) {
      connectionListeners.add(listener);
      return () => void connectionListeners.delete(listener);
    },

    async probe() {
      const me = await guard("getMe", () => telegram.getMe());
      return `@${me.username}`;
    },

    async start(eventSink) {
      if (running) throw new ChannelError("the Telegram adapter is already running", "telegram");
      const me = await guard("getMe", () => telegram.getMe());
      identity = { id: me.id, username: me.username };
      sink = eventSink;
      lifetime = new AbortController();
      running = true;
      try {
        if (options.mode === "webhook") await startWebhookMode(options.webhook!);
        else await startPollingMode();
      } catch (error) {
        running = false;
        throw error;
      }
      logger.info({ channel: "telegram", mode: options.mode, bot: identity.username }, "telegram channel started");
    },

    async stop() {
      if (!running) return;
      running = false;
      lifetime.abort();
      await polling?.stop();
      polling = undefined;
      await chats.idle();
      logger.info({ channel: "telegram" }, "telegram channel stopped");
    },

    async send(chatId, text, sendOptions: SendOptions) {
      const message = await guard("sendMessage", () =>
        telegram.sendMessage(chatIdOf(chatId), text, {
          parse_mode: sendOptions.format === "formatted" ? "HTML" : undefined,
          reply_parameters: sendOptions.replyTo ? { message_id: messageIdOf(sendOptions.replyTo), allow_sending_without_reply: true } : undefined,
        }),
      );
      return { platformMessageId: String(message.message_id) };
    },

    async edit(chatId, platformMessageId, text, sendOptions) {
      const messageId = messageIdOf(platformMessageId);
      try {
        await telegram.editMessageText(chatIdOf(chatId), messageId, undefined, text, {
          parse_mode: sendOptions.format === "formatted" ? "HTML" : undefined,
        });
      } catch (error) {
        if (isNotModified(error)) return;
        throw toChannelError(error, "editMessageText", scrub);
      }
    },

    async draft(chatId, draftId, text) {
      await callRaw("sendMessageDraft", { chat_id: chatIdOf(chatId), draft_id: draftId, text });
    },

    async typing(chatId) {
      try {
        await telegram.sendChatAction(chatIdOf(chatId), "typing");
      } catch (error) {
        // Best effort: a missing "typing…" is not worth failing a reply over.
        logger.debug({ channel: "telegram", chatId, error: toChannelError(error, "sendChatAction", scrub).message }, "telegram typing failed");
      }
    },
  };
}
