/**
 * The Slack channel: a ChannelAdapter for a Slack app's bot user, through the official SDK
 * (`@slack/web-api`'s WebClient for the Web API, `@slack/socket-mode` for Socket Mode).
 *
 * - Inbound: Socket Mode envelopes (socket-connection.ts) or the signed Events API callback
 *   (webhook-handler.ts): `message` events of DMs, channels, private channels and group DMs,
 *   `app_mention`, and slash commands. Each is acknowledged at once, deduped and handed to the
 *   sink per chat in order (inbound-queue.ts), normalized in inbound-event.ts.
 * - Outbound: chat.postMessage in mrkdwn (render-mrkdwn.ts), into the thread a thread chat names
 *   (chat-id.ts); streaming edits one message with chat.update (web-api.ts). Slack takes no
 *   idempotency key for messages: the bus's delivery dedupe keeps a re-run reply single.
 * - Pace: the send governor keeps every call within slackQuotas (quotas.ts); a 429 the SDK is
 *   told not to wait out comes back as a ChannelError `rate-limit` naming its budget.
 * - Errors: ChannelError kinds with no token in their text (slack-errors.ts).
 *
 * Slack shows apps no typing indicator over the Events API: typing() does nothing.
 */
import type { Logger } from "pino";
import { ChannelError } from "../../src/errors.js";
import { type ChannelAdapter, type ChannelCapabilities, type EventSink, ExpiringSet, type Scrub, type SendOptions, createScrubber } from "../../src/gateway/kit/index.js";
import { targetOf } from "./chat-id.js";
import { SLACK_FILE_HOSTS, createFileDownloader } from "./file-download.js";
import { type InboundQueue, createInboundQueue } from "./inbound-queue.js";
import { DRAFT_INTERVAL_MS, MAX_MESSAGE_LENGTH, MIN_SEND_INTERVAL_MS } from "./quotas.js";
import { renderSlackMrkdwn, slackRenderedLength } from "./render-mrkdwn.js";
import { type SocketConnection, createSocketConnection } from "./socket-connection.js";
import { type Identity, type SlackApi, createSlackApi } from "./web-api.js";
import { type CallbackHandler, createCallbackHandler } from "./webhook-handler.js";

export interface SlackAdapterOptions {
  /** `xoxb-…` (secret): never logged, scrubbed from errors. */
  botToken: string;
  /** `xapp-…` (secret), Socket Mode. */
  appToken?: string;
  /** (secret) HTTP mode. */
  signingSecret?: string;
  mode: "socket" | "http";
  /** The Web API root. */
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

export const slackCapabilities: ChannelCapabilities = {
  maxMessageLength: MAX_MESSAGE_LENGTH,
  streaming: "edit",
  draftIntervalMs: DRAFT_INTERVAL_MS,
  minSendIntervalMs: MIN_SEND_INTERVAL_MS,
};

/** Told to the sender of a message that could not be handed over: Slack will not send it again. */
export const DROPPED_NOTICE = "Sorry, I could not take that message just now. Please send it again in a minute.";

type ConnectionListener = (change: { connected: boolean; reason?: string }) => void;

const WEEK_MS = 7 * 24 * 60 * 60_000;

export function createSlackAdapter(options: SlackAdapterOptions): SlackAdapter {
  if (!options.botToken) throw new ChannelError("the Slack channel needs a bot token", "slack");
  if (options.mode === "socket" && !options.appToken) throw new ChannelError("the Slack channel in socket mode needs an app-level token", "slack");
  if (options.mode === "http" && !options.signingSecret) throw new ChannelError("the Slack channel in http mode needs a signing secret", "slack");
  return new SlackChannelAdapter(options);
}

class SlackChannelAdapter implements SlackAdapter {
  readonly name = "slack";
  readonly capabilities = slackCapabilities;
  readonly webhook: CallbackHandler;
  readonly render = renderSlackMrkdwn;
  readonly measure = slackRenderedLength;
  identity: Identity | undefined;
  private readonly scrub: Scrub;
  private readonly apiUrl: string;
  private readonly api: SlackApi;
  private readonly inbound: InboundQueue;
  /** Threads the bot posted into: a message there is addressed to it. */
  private readonly answered: ExpiringSet;
  private readonly listeners = new Set<ConnectionListener>();
  private running = false;
  private connection: SocketConnection | undefined;

  constructor(private readonly options: SlackAdapterOptions) {
    const { botToken, logger } = options;
    const now = options.now ?? Date.now;
    this.scrub = createScrubber([botToken, options.appToken, options.signingSecret], { replacement: "[token]", patterns: [/\bxox[abposr]-[\w-]+/, /\bxapp-[\w-]+/] });
    this.apiUrl = options.apiUrl.endsWith("/") ? options.apiUrl : `${options.apiUrl}/`;
    this.api = createSlackApi({ botToken, apiUrl: this.apiUrl, scrub: this.scrub, logger, now });
    this.answered = new ExpiringSet(WEEK_MS, now, 100_000);
    const downloader = createFileDownloader({ botToken, downloadDir: options.downloadDir, maxImageBytes: options.maxImageBytes, maxFileBytes: options.maxFileBytes, allowedHosts: [...SLACK_FILE_HOSTS, new URL(this.apiUrl).hostname], logger });
    const identity = () => this.identity;
    this.inbound = createInboundQueue({
      context: {
        get botUserId() {
          return identity()?.userId ?? "";
        },
        get botName() {
          return identity()?.name ?? "bot";
        },
        nameOf: (userId) => this.api.nameOf(userId),
        download: downloader.download,
        answeredIn: (chatId) => this.answered.has(chatId),
        threadStart: (chatId) => this.api.threadStart(chatId, this.identity),
        inheritParent: options.inheritParent,
        filesUnaddressed: options.filesUnaddressed ?? false,
        now,
      },
      botId: () => this.identity?.botId,
      notifyDropped: async (event) => void (await this.send(event.chatId, DROPPED_NOTICE, { format: "plain" })),
      logger,
      now,
      ...(options.handOverBackoffMs === undefined ? {} : { handOverBackoffMs: options.handOverBackoffMs }),
    });
    this.webhook = options.mode === "http" ? this.callbackHandler(now) : async () => ({ status: 404, body: { error: "the Slack channel runs Socket Mode, not the Events API over HTTP" } });
  }

  private callbackHandler(now: () => number): CallbackHandler {
    return createCallbackHandler({
      signingSecret: this.options.signingSecret!,
      accepting: () => this.running,
      onEvent: (callback, retryAttempt) => this.inbound.event(callback, retryAttempt),
      onCommand: (command) => {
        this.inbound.command(command);
        return { response_type: "ephemeral", text: `Received ${command.command}.` };
      },
      logger: this.options.logger,
      now,
    });
  }

  get reconnects(): number {
    return this.connection?.reconnects ?? 0;
  }

  botUsername(): string | undefined {
    return this.identity?.name;
  }

  watchConnection(listener: ConnectionListener): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  async probe(): Promise<string> {
    const me = await this.api.whoAmI();
    return `${me.name} (${me.userId})${me.team ? ` in ${me.team}` : ""}`;
  }

  async start(sink: EventSink): Promise<void> {
    if (this.running) throw new ChannelError("the Slack adapter is already running", "slack");
    const { options } = this;
    // The bot token first: a refused one fails the start, whichever the mode.
    this.identity = await this.api.whoAmI();
    this.inbound.open(sink);
    this.running = true;
    if (options.mode === "socket") {
      this.connection = createSocketConnection({
        appToken: options.appToken!,
        apiUrl: this.apiUrl,
        onEnvelope: (type, body, retryAttempt) => this.inbound.envelope(type, body, retryAttempt),
        onConnection: (change) => this.listeners.forEach((listener) => listener(change)),
        scrub: this.scrub,
        logger: options.logger,
        ...(options.connectTimeoutMs ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
      });
      try {
        await this.connection.start();
      } catch (error) {
        this.running = false;
        this.connection = undefined;
        await this.inbound.close();
        throw error;
      }
    }
    options.logger.info({ channel: "slack", mode: options.mode, bot: this.identity.name, botUserId: this.identity.userId }, "slack channel started");
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    await this.connection?.stop();
    this.connection = undefined;
    await this.inbound.close();
    this.options.logger.info({ channel: "slack" }, "slack channel stopped");
  }

  async send(chatId: string, text: string, sendOptions: SendOptions): Promise<{ platformMessageId: string }> {
    const ts = await this.api.post(chatId, text, sendOptions.format === "plain");
    if (targetOf(chatId).threadTs) this.answered.add(chatId);
    return { platformMessageId: ts };
  }

  async edit(chatId: string, platformMessageId: string, text: string, sendOptions: SendOptions): Promise<void> {
    await this.api.update(chatId, platformMessageId, text, sendOptions.format === "plain");
  }

  async typing(): Promise<void> {
    // Slack shows apps no typing indicator over the Events API.
  }
}
