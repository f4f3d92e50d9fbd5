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
import { TelegramBotApi } from "./bot-api.js";
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

/** What the inbound side of a running adapter reads: who the bot is, where events go, and whether it runs. */
interface InboundState {
  identity: BotIdentity | undefined;
  sink: EventSink | undefined;
  running: boolean;
  /** Aborts downloads of a stopping adapter. */
  lifetime: AbortController;
  /** Webhook mode: a lane per chat, so a chat's events stay in order. */
  chats: KeyedLanes;
}

type UpdateHandler = (update: TelegramUpdate, signal: AbortSignal) => Promise<void>;

/** Turns an update's message into a PlatformEvent (downloading its file) and hands it to the sink. */
function createUpdateHandler(state: InboundState, download: ReturnType<typeof createFileDownloader>["download"], now: () => number): UpdateHandler {
  return async (update, signal) => {
    const message = update.message;
    if (!message || !state.identity || !state.sink) return;
    const event: PlatformEvent = await toPlatformEvent(update.update_id, message, { bot: state.identity, download, now }, signal);
    if (signal.aborted) throw signal.reason ?? new Error("aborted");
    await state.sink(event);
  };
}

/** The webhook endpoint when a secret is configured (it answers 503 unless running in webhook mode); otherwise a 404. */
function createWebhook(options: TelegramAdapterOptions, state: InboundState, handleUpdate: UpdateHandler): WebhookHandler {
  if (!options.webhook?.secret) return async () => ({ status: 404, error: "the Telegram channel has no webhook" });
  return createWebhookHandler({
    secret: options.webhook.secret,
    accepting: () => state.running && options.mode === "webhook",
    handle: (update) => {
      const signal = state.lifetime.signal;
      return state.chats.run(String(update.message?.chat.id ?? ""), () => handleUpdate(update, signal));
    },
    logger: options.logger,
  });
}

/** Polling mode: removes any webhook (getUpdates answers 409 while one is set; pending updates stay queued), then long-polls. */
async function startPollingMode(options: TelegramAdapterOptions, api: TelegramBotApi, handleUpdate: UpdateHandler, onConnectionChange: (connected: boolean, reason?: string) => void): Promise<Polling> {
  const { logger } = options;
  await api.guard("deleteWebhook", () => api.telegram.deleteWebhook({ drop_pending_updates: false }));
  return startPolling({
    getUpdates: (params, signal) => api.callRaw<unknown[]>("getUpdates", { ...params, allowed_updates: ["message"] }, signal),
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
    onConnectionChange,
  });
}

export function createTelegramAdapter(options: TelegramAdapterOptions): TelegramAdapter {
  const { token, logger } = options;
  if (!token) throw new ChannelError("the Telegram channel needs a bot token", "telegram");
  if (options.mode === "webhook" && (!options.webhook?.url || !options.webhook.secret)) {
    throw new ChannelError("Telegram webhook mode needs webhook.url and webhook.secret", "telegram");
  }
  // A root without its trailing slash would lose its last path segment when telegraf resolves `./bot<token>/...` on it.
  const apiRoot = (options.apiRoot ?? defaultApiRoot).replace(/\/*$/, "/");
  const scrub = createScrubber([token], { replacement: "[token]" });
  const api = new TelegramBotApi(new Telegraf(token, { telegram: { apiRoot } }).telegram, scrub, logger);
  const downloader = createFileDownloader({
    getFile: async (fileId, signal) => TelegramFileSchema.parse(await api.callRaw("getFile", { file_id: fileId }, signal)),
    fileUrl: (filePath) => new URL(`./file/bot${token}/${filePath}`, apiRoot).toString(),
    fetch: options.fetch ?? globalThis.fetch,
    downloadDir: options.downloadDir,
    maxFileBytes: options.maxFileBytes,
    logger,
    scrub,
  });
  const state: InboundState = { identity: undefined, sink: undefined, running: false, lifetime: new AbortController(), chats: new KeyedLanes() };
  const handleUpdate = createUpdateHandler(state, downloader.download, options.now ?? Date.now);
  const handleWebhook = createWebhook(options, state, handleUpdate);
  let polling: Polling | undefined;
  const connectionListeners = new Set<(change: { connected: boolean; reason?: string }) => void>();
  const onConnectionChange = (connected: boolean, reason?: string) => {
    for (const listener of connectionListeners) listener({ connected, reason });
  };

  return {
    name: "telegram",
    capabilities: telegramCapabilities,
    render: (markdown) => ({ text: renderTelegramHtml(markdown), format: "formatted" }),
    measure: telegramRenderedLength,
    handleWebhook,
    get identity() {
      return state.identity;
    },
    botUsername() {
      return state.identity?.username;
    },
    watchConnection(listener) {
      connectionListeners.add(listener);
      return () => void connectionListeners.delete(listener);
    },

    async probe() {
      const me = await api.guard("getMe", () => api.telegram.getMe());
      return `@${me.username}`;
    },

    async start(eventSink) {
      if (state.running) throw new ChannelError("the Telegram adapter is already running", "telegram");
      const me = await api.guard("getMe", () => api.telegram.getMe());
      Object.assign(state, { identity: { id: me.id, username: me.username }, sink: eventSink, lifetime: new AbortController(), running: true });
      try {
        if (options.mode === "polling") {
          polling = await startPollingMode(options, api, handleUpdate, onConnectionChange);
        } else {
          const webhook = options.webhook!;
          webhook.register?.(handleWebhook, webhook.path);
          await api.guard("setWebhook", () => api.telegram.setWebhook(webhook.url, { secret_token: webhook.secret, allowed_updates: ["message"] }));
        }
      } catch (error) {
        state.running = false;
        throw error;
      }
      logger.info({ channel: "telegram", mode: options.mode, bot: me.username }, "telegram channel started");
    },

    async stop() {
      if (!state.running) return;
      state.running = false;
      state.lifetime.abort();
      await polling?.stop();
      polling = undefined;
      await state.chats.idle();
      logger.info({ channel: "telegram" }, "telegram channel stopped");
    },

    send: (chatId, text, sendOptions: SendOptions) => api.send(chatId, text, sendOptions),
    edit: (chatId, platformMessageId, text, sendOptions) => api.edit(chatId, platformMessageId, text, sendOptions),
    draft: (chatId, draftId, text) => api.draft(chatId, draftId, text),
    typing: (chatId) => api.typing(chatId),
  };
}
