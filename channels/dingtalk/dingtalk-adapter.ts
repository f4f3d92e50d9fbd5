/**
 * The DingTalk channel: a ChannelAdapter for the robot of an enterprise internal app.
 *
 * - Inbound: the Stream long connection (stream-connection.ts, the official SDK) or the signed
 *   HTTP callback (webhook-handler.ts); robot messages only. A message is acknowledged (Stream) or
 *   answered 200 (HTTP) once admission took it; one that was not is left for DingTalk to deliver
 *   again. Duplicates: the event id is the msgId, deduped by the bus (`seen:` keys, a day) across
 *   restarts and gateways, and by the inbound queue (inbound-queue.ts) before anything downloads;
 *   each chat's messages reach the sink in order.
 * - Outbound: Markdown messages through the OpenAPI, or a session webhook for senders outside the
 *   organization (message-sender.ts).
 * - Streaming: a reply's drafts open an AI card and update it in place (ai-card.ts); the final text
 *   finishes it. Without cards (`aiCard.enabled: false`) only finals are sent. Robot messages
 *   cannot be edited: an edit of anything but a card is `not-found`, and the dispatcher sends anew.
 * - Errors: ChannelError kinds with no credential in their text (dingtalk-errors.ts).
 *
 * DingTalk shows robots no typing indicator: typing() does nothing.
 */
import type { Logger } from "pino";
import { ChannelError } from "../../src/errors.js";
import type { ChannelAdapter, ChannelCapabilities, SendOptions } from "../../src/gateway/kit/index.js";
import { type CardStreamer, createCardStreamer, isCardId } from "./ai-card.js";
import { routeOf } from "./chat-route.js";
import { createDingTalkScrubber } from "./dingtalk-errors.js";
import { createFileDownloader } from "./file-download.js";
import { type InboundQueue, createInboundQueue } from "./inbound-queue.js";
import { type MessageSender, createMessageSender } from "./message-sender.js";
import { createDingTalkApi } from "./open-api.js";
import { DRAFT_INTERVAL_MS, MAX_MESSAGE_LENGTH, MIN_SEND_INTERVAL_MS } from "./quotas.js";
import { dingtalkRenderedLength, renderDingTalkMarkdown } from "./render-markdown.js";
import { type StreamConnection, createStreamConnection } from "./stream-connection.js";
import { type CallbackHandler, createCallbackHandler } from "./webhook-handler.js";

export interface DingTalkAdapterOptions {
  appKey: string;
  /** Secret: never logged, scrubbed from errors. */
  appSecret: string;
  robotCode: string;
  robotName?: string;
  apiRoot: string;
  mode: "stream" | "http";
  aiCard: { enabled: boolean; templateId: string; contentKey: string; settleMs: number };
  maxImageBytes: number;
  maxFileBytes: number;
  downloadDir: string;
  logger: Logger;
  now?: () => number;
  /** Messages older than this are dropped, not answered. Default 12 h (the bus's dedupe holds for 24 h). */
  maxEventAgeMs?: number;
}

export interface DingTalkAdapter extends ChannelAdapter {
  /** The HTTP callback (http mode); 404 in stream mode, 503 until start() and after stop(). */
  readonly webhook: CallbackHandler;
  /** Stream reconnects so far. */
  readonly reconnects: number;
}

const HOUR_MS = 60 * 60_000;

/** The HTTP callback in http mode; in stream mode a 404 that says why. */
function createWebhook(options: DingTalkAdapterOptions, accepting: () => boolean, inbound: InboundQueue, now: () => number): CallbackHandler {
  if (options.mode !== "http") return async () => ({ status: 404, body: { error: "the DingTalk channel runs the Stream connection, not the HTTP callback" } });
  return createCallbackHandler({ appSecret: options.appSecret, accepting, handle: inbound.receive, logger: options.logger, now });
}

/**
 * A draft opens an AI card (a session webhook cannot update what it sent: such a chat, or a
 * robot without cards, gets the final reply only); anything else is posted as a message.
 */
async function sendReply(sender: MessageSender, cards: CardStreamer | undefined, chatId: string, text: string, sendOptions: SendOptions): Promise<{ platformMessageId: string }> {
  const route = routeOf(chatId);
  const key = sendOptions.idempotencyKey;
  if (key?.endsWith("#draft")) {
    if (!cards || route.kind === "session") throw new ChannelError("dingtalk: no streamed reply in this chat", "dingtalk");
    return { platformMessageId: await cards.open(route, key, text) };
  }
  return { platformMessageId: await sender.post(chatId, text, sendOptions) };
}

/** Only AI cards are updated; finals carry `outbound` (the plugin asks for annotated sends), drafts do not. */
async function updateCard(cards: CardStreamer | undefined, chatId: string, platformMessageId: string, text: string, sendOptions: SendOptions): Promise<void> {
  if (!cards || !isCardId(platformMessageId)) {
    throw new ChannelError(`dingtalk cannot edit ${platformMessageId} in ${chatId}: only cards are updated`, "dingtalk", { kind: "not-found" });
  }
  await cards.update(platformMessageId, text, sendOptions.outbound !== undefined);
}

export function createDingTalkAdapter(options: DingTalkAdapterOptions): DingTalkAdapter {
  const { appKey, appSecret, robotCode, logger } = options;
  if (!appKey || !appSecret) throw new ChannelError("the DingTalk channel needs an app key and an app secret", "dingtalk");
  const now = options.now ?? Date.now;
  const scrubber = createDingTalkScrubber([appSecret]);
  const api = createDingTalkApi({ apiRoot: options.apiRoot, appKey, appSecret, scrubber, now });
  const downloader = createFileDownloader({ api, robotCode, downloadDir: options.downloadDir, maxImageBytes: options.maxImageBytes, maxFileBytes: options.maxFileBytes, logger });
  const cards: CardStreamer | undefined = options.aiCard.enabled ? createCardStreamer({ api, robotCode, ...options.aiCard, logger }) : undefined;
  const capabilities: ChannelCapabilities = {
    maxMessageLength: MAX_MESSAGE_LENGTH,
    streaming: cards ? "edit" : "none",
    draftIntervalMs: DRAFT_INTERVAL_MS,
    minSendIntervalMs: MIN_SEND_INTERVAL_MS,
  };

  const sender = createMessageSender({ api, robotCode, ...(options.robotName ? { robotName: options.robotName } : {}), now });
  const inbound = createInboundQueue({ download: downloader.download, onMessage: sender.remember, logger, now, maxEventAgeMs: options.maxEventAgeMs ?? 12 * HOUR_MS });
  let running = false;
  let connection: StreamConnection | undefined;
  const connectionListeners = new Set<(change: { connected: boolean; reason?: string }) => void>();

  return {
    name: "dingtalk",
    capabilities,
    webhook: createWebhook(options, () => running, inbound, now),
    get reconnects() {
      return connection?.reconnects ?? 0;
    },
    botUsername: () => options.robotName,
    watchConnection(listener) {
      connectionListeners.add(listener);
      return () => void connectionListeners.delete(listener);
    },
    render: renderDingTalkMarkdown,
    measure: dingtalkRenderedLength,

    async probe() {
      await api.accessToken();
      return `robot ${robotCode} (app ${appKey})`;
    },

    async start(eventSink) {
      if (running) throw new ChannelError("the DingTalk adapter is already running", "dingtalk");
      // Credentials first: a refused app key fails the start, whichever the mode.
      await api.accessToken();
      inbound.open(eventSink);
      running = true;
      if (options.mode === "stream") {
        connection = createStreamConnection({
          apiRoot: options.apiRoot,
          appKey,
          appSecret,
          onMessage: inbound.receiveFrame,
          onConnection: (change) => connectionListeners.forEach((listener) => listener(change)),
          scrub: scrubber.scrub,
          logger,
        });
        try {
          await connection.start();
        } catch (error) {
          running = false;
          connection = undefined;
          throw error;
        }
      }
      logger.info({ channel: "dingtalk", mode: options.mode, robotCode }, "dingtalk channel started");
    },

    async stop() {
      if (!running) return;
      running = false;
      await connection?.stop();
      connection = undefined;
      await inbound.close();
      await cards?.settleAll();
      logger.info({ channel: "dingtalk" }, "dingtalk channel stopped");
    },

    send: (chatId, text, sendOptions) => sendReply(sender, cards, chatId, text, sendOptions),
    edit: (chatId, platformMessageId, text, sendOptions) => updateCard(cards, chatId, platformMessageId, text, sendOptions),

    async finishStream(_chatId, platformMessageId, text) {
      if (cards && isCardId(platformMessageId)) await cards.settle(platformMessageId, text);
    },

    async typing() {
      // DingTalk shows robots no typing indicator.
    },
  };
}
