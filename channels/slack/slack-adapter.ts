/**
 * The Slack channel: a ChannelAdapter for a Slack app's bot user, through the official SDK
 * (`@slack/web-api`'s WebClient for the Web API, `@slack/socket-mode` for Socket Mode).
 *
 * - Inbound: Socket Mode envelopes (socket-connection.ts) or the signed Events API callback
 *   (webhook-handler.ts): `message` events of DMs, channels, private channels and group DMs,
 *   `app_mention`, and slash commands. Each is acknowledged at once, deduped and handed to the
 *   sink per chat in order (inbound-queue.ts), normalized in inbound-event.ts.
 * - Outbound: chat.postMessage in mrkdwn (render-mrkdwn.ts), into the thread a thread chat names
 *   (chat-id.ts); streaming edits one message with chat.update. Slack takes no idempotency key for
 *   messages: the bus's delivery dedupe keeps a re-run reply single.
 * - Pace: the send governor keeps every call within slackQuotas (quotas.ts); a 429 the SDK is
 *   told not to wait out comes back as a ChannelError `rate-limit` naming its budget.
 * - Errors: ChannelError kinds with no token in their text (slack-errors.ts).
 *
 * Slack shows apps no typing indicator over the Events API: typing() does nothing.
 */
import { WebClient } from "@slack/web-api";
import type { Logger } from "pino";
import { ChannelError } from "../../src/errors.js";
import { type ChannelAdapter, type ChannelCapabilities, ExpiringMap, ExpiringSet, createScrubber } from "../../src/gateway/kit/index.js";
import { chatIdOf, targetOf } from "./chat-id.js";
import { SLACK_FILE_HOSTS, createFileDownloader } from "./file-download.js";
import { type InboundQueue, createInboundQueue } from "./inbound-queue.js";
import { DRAFT_INTERVAL_MS, MAX_MESSAGE_LENGTH, MIN_SEND_INTERVAL_MS } from "./quotas.js";
import { escapeMrkdwn, renderSlackMrkdwn, slackRenderedLength } from "./render-mrkdwn.js";
import { toChannelError } from "./slack-errors.js";
import { type SocketConnection, createSocketConnection, slackLogger } from "./socket-connection.js";
import { type CallbackHandler, createCallbackHandler } from "./webhook-handler.js";

export interface SlackAdapterOptions {
  /** `xoxb-…` (secret): never logged, scrubbed from errors. */
  botToken: string;
  /** `xapp-…` (secret), Socket Mode. */
  appToken?: string;
  /** (secret) HTTP mode. */
  signingSecret?: string;
  mode: "socket" | "http";
  /** The Web API root, ending in `/`. */
  apiUrl: string;
  inheritParent: boolean;
  /** Download files of channel messages that do not address the bot (`groupPolicy: "all"`). Default false. */
  filesUnaddressed?: boolean;
  maxImageBytes: number;
  maxFileBytes: number;
  downloadDir: string;
  logger: Logger;
  now?: () => number;
  /** First pause between hand-over attempts of an event. Default 500 ms. */
  handOverBackoffMs?: number;
  /** How long start() waits for Socket Mode's hello. Default 20 s. */
  connectTimeoutMs?: number;
}

export interface SlackAdapter extends ChannelAdapter {
  /** The HTTP callback (http mode); 404 in socket mode, 503 until start() and after stop(). */
  readonly webhook: CallbackHandler;
  /** The bot user; known once start() resolved. */
  readonly identity: Identity | undefined;
  /** Socket Mode reconnects so far. */
  readonly reconnects: number;
}

interface Identity {
  userId: string;
  name: string;
  botId?: string;
  team?: string;
}

export const slackCapabilities: ChannelCapabilities = {
  maxMessageLength: MAX_MESSAGE_LENGTH,
  streaming: "edit",
  draftIntervalMs: DRAFT_INTERVAL_MS,
  minSendIntervalMs: MIN_SEND_INTERVAL_MS,
};

/** Told to the sender of a message that could not be handed over: Slack will not send it again. */
export const DROPPED_NOTICE = "Sorry, I could not take that message just now. Please send it again in a minute.";

const HOUR_MS = 60 * 60_000;

export function createSlackAdapter(options: SlackAdapterOptions): SlackAdapter {
  const { botToken, logger } = options;
  if (!botToken) throw new ChannelError("the Slack channel needs a bot token", "slack");
  if (options.mode === "socket" && !options.appToken) throw new ChannelError("the Slack channel in socket mode needs an app-level token", "slack");
  if (options.mode === "http" && !options.signingSecret) throw new ChannelError("the Slack channel in http mode needs a signing secret", "slack");
  const now = options.now ?? Date.now;
  const scrub = createScrubber([botToken, options.appToken, options.signingSecret], { replacement: "[token]", patterns: [/\bxox[abposr]-[\w-]+/, /\bxapp-[\w-]+/] });
  const apiUrl = options.apiUrl.endsWith("/") ? options.apiUrl : `${options.apiUrl}/`;
  const web = new WebClient(botToken, {
    slackApiUrl: apiUrl,
    logger: slackLogger(logger.child({ channel: "slack" }), scrub),
    // The runtime retries and paces: the SDK throws a 429 instead of waiting it out, and tries once.
    rejectRateLimitedCalls: true,
    retryConfig: { retries: 0 },
    timeout: 15_000,
    allowAbsoluteUrls: false,
  });
  const downloader = createFileDownloader({
    botToken,
    downloadDir: options.downloadDir,
    maxImageBytes: options.maxImageBytes,
    maxFileBytes: options.maxFileBytes,
    allowedHosts: [...SLACK_FILE_HOSTS, new URL(apiUrl).hostname],
    logger,
  });
  const names = new ExpiringMap<string>(HOUR_MS, now, 10_000);
  /** Threads the bot posted into: a message there is addressed to it. */
  const answered = new ExpiringSet(7 * 24 * HOUR_MS, now, 100_000);
  /** Threads whose first message the model was shown. */
  const introduced = new ExpiringSet(7 * 24 * HOUR_MS, now, 100_000);
  const connectionListeners = new Set<(change: { connected: boolean; reason?: string }) => void>();
  let identity: Identity | undefined;
  let running = false;
  let connection: SocketConnection | undefined;

  async function call<T>(method: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw toChannelError(error, method, scrub);
    }
  }

  async function nameOf(userId: string): Promise<string | undefined> {
    const known = names.get(userId);
    if (known !== undefined) return known || undefined;
    try {
      const { user } = await web.users.info({ user: userId });
      const name = user?.profile?.display_name || user?.profile?.real_name || user?.real_name || user?.name || "";
      names.set(userId, name);
      return name || undefined;
    } catch (error) {
      logger.debug({ channel: "slack", userId, error: toChannelError(error, "users.info", scrub).message }, "slack user not named");
      return undefined;
    }
  }

  /** The message a thread started from (conversations.replies), the first time the thread is asked for. */
  async function threadStart(chatId: string, channel: string, threadTs: string): Promise<{ text: string; userId?: string } | undefined> {
    if (!introduced.add(chatId)) return undefined;
    try {
      const { messages } = await web.conversations.replies({ channel, ts: threadTs, limit: 1, inclusive: true });
      const parent = messages?.[0];
      if (!parent || parent.ts !== threadTs || (parent.user !== undefined && parent.user === identity?.userId) || (parent.bot_id !== undefined && parent.bot_id === identity?.botId)) return undefined;
      return { text: parent.text ?? "", ...(parent.user ? { userId: parent.user } : {}) };
    } catch (error) {
      logger.debug({ channel: "slack", chatId, error: toChannelError(error, "conversations.replies", scrub).message }, "slack thread's first message not read");
      return undefined;
    }
  }

  const inbound: InboundQueue = createInboundQueue({
    context: {
      get botUserId() {
        return identity?.userId ?? "";
      },
      get botName() {
        return identity?.name ?? "bot";
      },
      nameOf,
      download: downloader.download,
      answeredIn: (chatId) => answered.has(chatId),
      threadStart,
      inheritParent: options.inheritParent,
      filesUnaddressed: options.filesUnaddressed ?? false,
      now,
    },
    botId: () => identity?.botId,
    notifyDropped: async (event) => void (await adapter.send(event.chatId, DROPPED_NOTICE, { format: "plain" })),
    logger,
    now,
    ...(options.handOverBackoffMs === undefined ? {} : { handOverBackoffMs: options.handOverBackoffMs }),
  });

  const webhook: CallbackHandler =
    options.mode === "http"
      ? createCallbackHandler({
          signingSecret: options.signingSecret!,
          accepting: () => running,
          onEvent: (callback, retryAttempt) => inbound.event(callback, retryAttempt),
          onCommand: (command) => {
            inbound.command(command);
            return { response_type: "ephemeral", text: `Received ${command.command}.` };
          },
          logger,
          now,
        })
      : async () => ({ status: 404, body: { error: "the Slack channel runs Socket Mode, not the Events API over HTTP" } });

  function onEnvelope(type: string, body: unknown, retryAttempt: number | undefined): void {
    if (type === "events_api") {
      const callback = body as { type?: unknown; event_id?: unknown; event?: { type?: unknown } };
      if (callback?.type !== "event_callback" || typeof callback.event_id !== "string" || typeof callback.event?.type !== "string") throw new Error("events_api envelope without an event_callback");
      inbound.event(callback as Parameters<InboundQueue["event"]>[0], retryAttempt);
    } else if (type === "slash_commands") {
      const command = body as Record<string, unknown>;
      if (typeof command?.command !== "string" || typeof command.trigger_id !== "string" || typeof command.channel_id !== "string" || typeof command.user_id !== "string") {
        throw new Error("slash_commands envelope without a command");
      }
      inbound.command({ text: "", ...command } as Parameters<InboundQueue["command"]>[0]);
    }
  }

  async function whoAmI(): Promise<Identity> {
    const answer = await call("auth.test", () => web.auth.test());
    if (!answer.user_id) throw new ChannelError("slack auth.test answered without a user id: is this a bot token?", "slack", { kind: "auth" });
    return { userId: answer.user_id, name: answer.user ?? "bot", ...(answer.bot_id ? { botId: answer.bot_id } : {}), ...(answer.team ? { team: answer.team } : {}) };
  }

  const adapter: SlackAdapter = {
    name: "slack",
    capabilities: slackCapabilities,
    webhook,
    get identity() {
      return identity;
    },
    get reconnects() {
      return connection?.reconnects ?? 0;
    },
    botUsername: () => identity?.name,
    watchConnection(listener) {
      connectionListeners.add(listener);
      return () => void connectionListeners.delete(listener);
    },
    render: renderSlackMrkdwn,
    measure: slackRenderedLength,

    async probe() {
      const me = await whoAmI();
      return `${me.name} (${me.userId})${me.team ? ` in ${me.team}` : ""}`;
    },

    async start(eventSink) {
      if (running) throw new ChannelError("the Slack adapter is already running", "slack");
      // The bot token first: a refused one fails the start, whichever the mode.
      identity = await whoAmI();
      inbound.open(eventSink);
      running = true;
      if (options.mode === "socket") {
        connection = createSocketConnection({
          appToken: options.appToken!,
          apiUrl,
          onEnvelope,
          onConnection: (change) => connectionListeners.forEach((listener) => listener(change)),
          scrub,
          logger,
          ...(options.connectTimeoutMs ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
        });
        try {
          await connection.start();
        } catch (error) {
          running = false;
          connection = undefined;
          await inbound.close();
          throw error;
        }
      }
      logger.info({ channel: "slack", mode: options.mode, bot: identity.name, botUserId: identity.userId }, "slack channel started");
    },

    async stop() {
      if (!running) return;
      running = false;
      await connection?.stop();
      connection = undefined;
      await inbound.close();
      logger.info({ channel: "slack" }, "slack channel stopped");
    },

    async send(chatId, text, sendOptions) {
      const { channel, threadTs } = targetOf(chatId);
      const plain = sendOptions.format === "plain";
      const answer = await call("chat.postMessage", () =>
        web.chat.postMessage({ channel, text: plain ? escapeMrkdwn(text) : text, mrkdwn: !plain, ...(threadTs ? { thread_ts: threadTs } : {}) }),
      );
      if (!answer.ts) throw new ChannelError("slack chat.postMessage answered without a ts", "slack");
      if (threadTs) answered.add(chatIdOf(channel, threadTs));
      return { platformMessageId: answer.ts };
    },

    async edit(chatId, platformMessageId, text, sendOptions) {
      const { channel } = targetOf(chatId);
      const plain = sendOptions.format === "plain";
      await call("chat.update", () => web.chat.update({ channel, ts: platformMessageId, text: plain ? escapeMrkdwn(text) : text }));
    },

    async typing() {
      // Slack shows apps no typing indicator over the Events API.
    },
  };
  return adapter;
}

