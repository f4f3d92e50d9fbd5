/**
 * The QQ channel: a ChannelAdapter for a bot of the QQ open platform (Bot API v2).
 *
 * - Inbound: the WebSocket gateway (gateway-connection.ts: identify, heartbeat, resume) or the
 *   Ed25519-signed webhook (webhook-handler.ts); group @-messages, C2C messages, guild channel
 *   and direct messages (events.ts). Each event id is taken once (inbound-queue.ts, and the bus's
 *   `seen:` keys across gateways), each chat's events reach the sink in order.
 * - Outbound: passive replies within QQ's reply window, active messages where allowed
 *   (message-sender.ts, reply-window.ts); Markdown messages with `markdown: true`, plain text
 *   otherwise (render-markdown.ts).
 * - No streaming: QQ cannot edit a bot's message, so only the final reply is sent (split into
 *   parts that fit); an edit is refused as `forbidden`.
 * - Errors: ChannelError kinds with no credential in their text (qq-errors.ts).
 *
 * QQ shows bots no typing indicator: typing() does nothing.
 */
import type { Logger } from "pino";
import { ChannelError } from "../../src/errors.js";
import type { ChannelAdapter, ChannelCapabilities, EventSink } from "../../src/gateway/kit/index.js";
import { isMessageEvent } from "./events.js";
import { type GatewayConnection, createGatewayConnection } from "./gateway-connection.js";
import { type InboundQueue, createInboundQueue } from "./inbound-queue.js";
import { type IntentName, intentsOf } from "./intents.js";
import { createMessageSender } from "./message-sender.js";
import { type QQApi, createQQApi } from "./open-api.js";
import { createQQScrubber } from "./qq-errors.js";
import { MAX_MESSAGE_LENGTH, MIN_SEND_INTERVAL_MS } from "./quotas.js";
import { createRenderer } from "./render-markdown.js";
import { ReplyWindow } from "./reply-window.js";
import { type CallbackHandler, createCallbackHandler } from "./webhook-handler.js";

export interface QQAdapterOptions {
  appId: string;
  /** Secret: never logged, scrubbed from errors. */
  appSecret: string;
  apiRoot: string;
  tokenUrl: string;
  mode: "websocket" | "webhook";
  intents: IntentName[];
  markdown: boolean;
  activeMessages: { groups: boolean; channels: boolean };
  webhookToleranceSeconds?: number;
  logger: Logger;
  now?: () => number;
  /** First pause before the sink is asked again for an event it failed to take. */
  retryBaseMs?: number;
}

export interface QQAdapter extends ChannelAdapter {
  /** The webhook (webhook mode); 404 in websocket mode. */
  readonly webhook: CallbackHandler;
  /** Gateway sessions opened or resumed after the first. */
  readonly reconnects: number;
  readonly resumes: number;
}

const qqCapabilities: ChannelCapabilities = { maxMessageLength: MAX_MESSAGE_LENGTH, streaming: "none", draftIntervalMs: 1_000, minSendIntervalMs: MIN_SEND_INTERVAL_MS };

/** The webhook endpoint in webhook mode; in websocket mode a 404 that says why. */
function createWebhook(options: QQAdapterOptions, accepting: () => boolean, inbound: InboundQueue, now: () => number): CallbackHandler {
  if (options.mode !== "webhook") return async () => ({ status: 404, body: { error: "the QQ channel runs the WebSocket gateway, not the webhook" } });
  return createCallbackHandler({ appSecret: options.appSecret, accepting, handle: inbound.receive, logger: options.logger, now, toleranceSeconds: options.webhookToleranceSeconds ?? 3_600 });
}

/** QQ bots cannot edit what they sent: an edit is refused as `forbidden`. */
async function refuseEdit(chatId: string, platformMessageId: string): Promise<never> {
  throw new ChannelError(`qq cannot edit message ${platformMessageId} in ${chatId}: QQ bots cannot edit what they sent`, "qq", { kind: "forbidden" });
}

/** The bot's own user, as `/users/@me` names it (undefined when the answer has no id). */
async function botUser(api: QQApi): Promise<{ id: string; username?: string } | undefined> {
  const me = await api.call<{ id?: unknown; username?: unknown }>("users/@me", "GET", "/users/@me");
  if (typeof me.id !== "string") return undefined;
  return { id: me.id, ...(typeof me.username === "string" ? { username: me.username } : {}) };
}

/** The WebSocket gateway (websocket mode): its message dispatches go to the inbound queue, its ups and downs to the listeners. */
function createQQGateway(
  options: QQAdapterOptions,
  parts: {
    api: QQApi;
    inbound: InboundQueue;
    scrub: (text: string) => string;
    onReady: (user: { id: string; username?: string }) => void;
    listeners: Set<(change: { connected: boolean; reason?: string }) => void>;
  },
): GatewayConnection {
  const { inbound, listeners } = parts;
  return createGatewayConnection({
    api: parts.api,
    intents: intentsOf(options.intents),
    onDispatch: (payload) => {
      if (isMessageEvent(payload.t)) void inbound.receive(payload.t, payload.id, payload.d).catch(() => undefined);
    },
    onReady: parts.onReady,
    onConnection: (change) => listeners.forEach((listener) => listener(change)),
    scrub: parts.scrub,
    logger: options.logger,
  });
}

export function createQQAdapter(options: QQAdapterOptions): QQAdapter {
  const { appId, appSecret, logger } = options;
  if (!appId || !appSecret) throw new ChannelError("the QQ channel needs an AppID and an AppSecret", "qq");
  const now = options.now ?? Date.now;
  const scrubber = createQQScrubber([appSecret]);
  const api = createQQApi({ apiRoot: options.apiRoot, tokenUrl: options.tokenUrl, appId, appSecret, scrubber, now });
  const window = new ReplyWindow(now);
  const sender = createMessageSender({ api, window, markdown: options.markdown, activeMessages: options.activeMessages });
  const renderer = createRenderer(options.markdown);
  let bot: { id: string; username?: string } | undefined;
  let running = false;
  let connection: GatewayConnection | undefined;
  const listeners = new Set<(change: { connected: boolean; reason?: string }) => void>();
  const inbound = createInboundQueue({
    logger,
    now,
    botId: () => bot?.id,
    onEvent: (event) => window.received(event.chatId, event.platformMessageId),
    ...(options.retryBaseMs === undefined ? {} : { retryBaseMs: options.retryBaseMs }),
  });

  const webhook = createWebhook(options, () => running, inbound, now);
  const whoAmI = async () => void (bot = (await botUser(api)) ?? bot);

  return {
    name: "qq",
    capabilities: qqCapabilities,
    webhook,
    get reconnects() {
      return connection?.reconnects ?? 0;
    },
    get resumes() {
      return connection?.resumes ?? 0;
    },
    botUsername: () => bot?.username,
    watchConnection(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    render: renderer.render,
    measure: renderer.measure,

    async probe() {
      await api.accessToken();
      await whoAmI().catch(() => undefined);
      return `bot ${bot?.username ?? "?"} (AppID ${appId})`;
    },

    async start(eventSink: EventSink) {
      if (running) throw new ChannelError("the QQ adapter is already running", "qq");
      // Credentials first: a refused AppSecret fails the start, whichever the mode.
      await api.accessToken();
      inbound.open(eventSink);
      running = true;
      try {
        if (options.mode === "websocket") {
          connection = createQQGateway(options, { api, inbound, scrub: scrubber.scrub, onReady: (user) => (bot = user), listeners });
          await connection.start();
        } else {
          await whoAmI().catch((error: unknown) => logger.warn({ channel: "qq", error: String(error) }, "qq bot user unknown; guild @-mentions in MESSAGE_CREATE are not seen"));
        }
      } catch (error) {
        running = false;
        connection = undefined;
        throw error;
      }
      logger.info({ channel: "qq", mode: options.mode, appId }, "qq channel started");
    },

    async stop() {
      if (!running) return;
      running = false;
      await connection?.stop();
      connection = undefined;
      await inbound.close();
      logger.info({ channel: "qq" }, "qq channel stopped");
    },

    send: async (chatId, text, sendOptions) => ({ platformMessageId: await sender.post(chatId, text, sendOptions) }),
    edit: refuseEdit,

    async typing() {
      // QQ shows bots no typing indicator.
    },
  };
}
