/**
 * The DingTalk channel: a ChannelAdapter for the robot of an enterprise internal app.
 *
 * - Inbound: the Stream long connection (stream-connection.ts, the official SDK) or the signed
 *   HTTP callback (webhook-handler.ts); robot messages only. A message is acknowledged (Stream) or
 *   answered 200 (HTTP) once admission took it; one that was not is left for DingTalk to deliver
 *   again. Duplicates: the event id is the msgId, deduped by the bus (`seen:` keys, a day) across
 *   restarts and gateways; a msgId in flight or taken in the last hour is dropped here before it
 *   downloads anything (and acknowledged once the first one is through), a message older than
 *   `maxEventAgeMs` too. Each chat's messages reach the sink in order.
 * - Outbound: Markdown messages (`sampleMarkdown`, or `sampleText` for the plain fallback) through
 *   the OpenAPI: `oToMessages/batchSend` into a one-to-one chat, `groupMessages/send` into a group;
 *   the platform message id is DingTalk's `processQueryKey`. A sender outside the organization (no
 *   staffId) is answered through the message's session webhook while it is valid. DingTalk takes
 *   no idempotency key for messages: the bus's delivery dedupe is what keeps a re-run reply single.
 * - Streaming: a reply's drafts open an AI card and update it in place (ai-card.ts); the final text
 *   finishes it. Without cards (`aiCard.enabled: false`) only finals are sent. Robot messages
 *   cannot be edited: an edit of anything but a card is `not-found`, and the dispatcher sends anew.
 * - Errors: ChannelError kinds with no credential in their text (dingtalk-errors.ts).
 *
 * DingTalk shows robots no typing indicator: typing() does nothing.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { ChannelError } from "../../src/errors.js";
import { type ChannelAdapter, type ChannelCapabilities, type EventSink, ExpiringSet, KeyedLanes, type SendOptions } from "../../src/gateway/kit/index.js";
import { type CardStreamer, createCardStreamer, isCardId } from "./ai-card.js";
import { type ChatRoute, chatIdOf, routeOf } from "./chat-route.js";
import { createDingTalkScrubber } from "./dingtalk-errors.js";
import { createFileDownloader } from "./file-download.js";
import { toPlatformEvent } from "./inbound-event.js";
import { createDingTalkApi } from "./open-api.js";
import { DRAFT_INTERVAL_MS, MAX_MESSAGE_LENGTH, MIN_SEND_INTERVAL_MS } from "./quotas.js";
import { dingtalkRenderedLength, renderDingTalkMarkdown, titleOf } from "./render-markdown.js";
import { type RobotMessage, RobotMessageSchema } from "./robot-message.js";
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
const MAX_SESSION_WEBHOOKS = 10_000;

interface Sent {
  processQueryKey?: string;
  invalidStaffIdList?: string[];
  flowControlledStaffIdList?: string[];
}

export function createDingTalkAdapter(options: DingTalkAdapterOptions): DingTalkAdapter {
  const { appKey, appSecret, robotCode, logger } = options;
  if (!appKey || !appSecret) throw new ChannelError("the DingTalk channel needs an app key and an app secret", "dingtalk");
  const now = options.now ?? Date.now;
  const maxEventAgeMs = options.maxEventAgeMs ?? 12 * HOUR_MS;
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

  let sink: EventSink | undefined;
  let running = false;
  let lifetime = new AbortController();
  let connection: StreamConnection | undefined;
  /** msgIds taken in the last hour, and those in flight (a redelivery waits for the first one). */
  const recent = new ExpiringSet(HOUR_MS, now);
  const taking = new Map<string, Promise<void>>();
  const chats = new KeyedLanes();
  /** Session webhooks of chats that have no other way back (`dm:` chats), until they expire. */
  const sessionWebhooks = new Map<string, { url: string; expiresAt: number }>();
  const connectionListeners = new Set<(change: { connected: boolean; reason?: string }) => void>();

  async function handOn(message: RobotMessage, signal: AbortSignal): Promise<void> {
    const event = await toPlatformEvent(message, { download: downloader.download, now }, signal);
    if (signal.aborted || !sink) throw new ChannelError("the DingTalk channel stopped before the message was taken", "dingtalk");
    const outcome = await sink(event);
    logger.debug({ channel: "dingtalk", chatId: event.chatId, messageId: message.msgId, outcome }, "dingtalk message handled");
  }

  function rememberSessionWebhook(message: RobotMessage): void {
    if (!message.sessionWebhook || !message.sessionWebhookExpiredTime) return;
    const chatId = chatIdOf(message);
    if (routeOf(chatId).kind !== "session") return;
    sessionWebhooks.delete(chatId);
    sessionWebhooks.set(chatId, { url: message.sessionWebhook, expiresAt: message.sessionWebhookExpiredTime });
    if (sessionWebhooks.size > MAX_SESSION_WEBHOOKS) sessionWebhooks.delete(sessionWebhooks.keys().next().value!);
  }

  /** Takes one message from either path; resolves when it may be acknowledged, rejects when it may not. */
  function receive(message: RobotMessage): Promise<void> {
    const fields = { channel: "dingtalk", messageId: message.msgId };
    if (recent.has(message.msgId)) {
      logger.debug(fields, "dingtalk message redelivered; dropped");
      return Promise.resolve();
    }
    const inFlight = taking.get(message.msgId);
    if (inFlight) return inFlight;
    if (message.createAt !== undefined && now() - message.createAt > maxEventAgeMs) {
      logger.warn({ ...fields, ageMs: now() - message.createAt }, "dingtalk message too old to answer; dropped");
      return Promise.resolve();
    }
    rememberSessionWebhook(message);
    const signal = lifetime.signal;
    const work = chats.run(chatIdOf(message), () => handOn(message, signal));
    taking.set(message.msgId, work);
    // Taken: remembered. Failed: forgotten, so that DingTalk's redelivery is taken.
    void work.then(
      () => recent.add(message.msgId),
      () => undefined,
    ).finally(() => taking.delete(message.msgId));
    return work;
  }

  async function receiveFrame(data: string): Promise<void> {
    let raw: unknown;
    try {
      raw = JSON.parse(data) as unknown;
    } catch {
      raw = undefined;
    }
    const parsed = RobotMessageSchema.safeParse(raw);
    if (!parsed.success) {
      // Never understood, however often it came: acknowledged so that DingTalk stops sending it.
      logger.warn({ channel: "dingtalk", error: parsed.error.issues[0]?.message }, "dingtalk robot message not understood; skipped");
      return;
    }
    await receive(parsed.data);
  }

  const webhook: CallbackHandler =
    options.mode === "http"
      ? createCallbackHandler({ appSecret, accepting: () => running, handle: receive, logger, now })
      : async () => ({ status: 404, body: { error: "the DingTalk channel runs the Stream connection, not the HTTP callback" } });

  function messageBody(text: string, format: SendOptions["format"]): { msgKey: string; msgParam: string } {
    if (format === "plain") return { msgKey: "sampleText", msgParam: JSON.stringify({ content: text }) };
    return { msgKey: "sampleMarkdown", msgParam: JSON.stringify({ title: titleOf(text, options.robotName), text }) };
  }

  async function sendBySession(chatId: string, text: string, format: SendOptions["format"], key: string | undefined): Promise<string> {
    const session = sessionWebhooks.get(chatId);
    if (!session || session.expiresAt <= now()) {
      throw new ChannelError("dingtalk: this chat's session webhook expired, and its sender has no user id to write to", "dingtalk", { kind: "not-found" });
    }
    const body = format === "plain" ? { msgtype: "text", text: { content: text } } : { msgtype: "markdown", markdown: { title: titleOf(text, options.robotName), text } };
    await api.postWebhook("sessionWebhook", session.url, body);
    // The session webhook names no message: an id of our own, stable for the same send.
    return `session:${createHash("sha256").update(key ?? `${chatId}:${now()}:${text}`).digest("hex").slice(0, 24)}`;
  }

  async function postMessage(route: ChatRoute, chatId: string, text: string, sendOptions: SendOptions): Promise<string> {
    if (route.kind === "session") return sendBySession(chatId, text, sendOptions.format, sendOptions.idempotencyKey);
    const body = messageBody(text, sendOptions.format);
    const sent =
      route.kind === "user"
        ? await api.call<Sent>("oToMessages.batchSend", "POST", "/v1.0/robot/oToMessages/batchSend", { robotCode, userIds: [route.staffId], ...body })
        : await api.call<Sent>("groupMessages.send", "POST", "/v1.0/robot/groupMessages/send", { robotCode, openConversationId: route.conversationId, ...body });
    if (route.kind === "user" && sent.invalidStaffIdList?.includes(route.staffId)) {
      throw new ChannelError("dingtalk oToMessages.batchSend: the user is not reachable by this robot", "dingtalk", { kind: "not-found" });
    }
    if (route.kind === "user" && sent.flowControlledStaffIdList?.includes(route.staffId)) {
      throw new ChannelError("dingtalk oToMessages.batchSend: the user's messages are flow-controlled", "dingtalk", { kind: "rate-limit", retryAfterMs: 1_000 });
    }
    if (!sent.processQueryKey) throw new ChannelError("dingtalk send answered without a processQueryKey", "dingtalk");
    return sent.processQueryKey;
  }

  return {
    name: "dingtalk",
    capabilities,
    webhook,
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
      sink = eventSink;
      lifetime = new AbortController();
      running = true;
      if (options.mode === "stream") {
        connection = createStreamConnection({
          apiRoot: options.apiRoot,
          appKey,
          appSecret,
          onMessage: receiveFrame,
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
      await Promise.allSettled([...taking.values()]);
      await cards?.settleAll();
      lifetime.abort();
      logger.info({ channel: "dingtalk" }, "dingtalk channel stopped");
    },

    async send(chatId, text, sendOptions) {
      const route = routeOf(chatId);
      const key = sendOptions.idempotencyKey;
      if (key?.endsWith("#draft")) {
        // A session webhook cannot update what it sent: such a chat gets the final reply only.
        if (!cards || route.kind === "session") throw new ChannelError("dingtalk: no streamed reply in this chat", "dingtalk");
        return { platformMessageId: await cards.open(route, key, text) };
      }
      return { platformMessageId: await postMessage(route, chatId, text, sendOptions) };
    },

    async edit(chatId, platformMessageId, text, sendOptions) {
      if (!cards || !isCardId(platformMessageId)) {
        throw new ChannelError(`dingtalk cannot edit ${platformMessageId} in ${chatId}: only cards are updated`, "dingtalk", { kind: "not-found" });
      }
      // Finals carry `outbound` (the plugin asks for annotated sends); drafts do not.
      await cards.update(platformMessageId, text, sendOptions.outbound !== undefined);
    },

    async typing() {
      // DingTalk shows robots no typing indicator.
    },
  };
}
