/**
 * The Discord channel: a ChannelAdapter over the gateway (discord.js Client) and REST v10
 * (@discordjs/rest).
 *
 * - Inbound: MESSAGE_CREATE through the Client (intents Guilds, GuildMessages, DirectMessages and
 *   the privileged MessageContent; Partials.Channel, or DMs from uncached channels would never
 *   arrive), normalized in inbound-event.ts. A DM is `private`, a guild text channel `group`, a
 *   thread `thread` with the thread's own id as the chat. The bot's own messages are dropped here;
 *   other bots' reach admission flagged. Events reach the sink one at a time per chat, in order; a
 *   sink that fails is retried with backoff, then the event is logged and dropped (the gateway
 *   cannot be asked for it again). A payload discord.js or the mapping cannot read is logged with
 *   its type and dropped: it never takes the process down.
 * - Outbound: POST channel messages with message_reference (fail_if_not_exists false: a deleted
 *   original does not lose the reply), a nonce derived from the idempotency key with enforce_nonce
 *   (Discord then answers a repeat with the first message instead of a second one), and
 *   allowed_mentions that ping the replied-to user and mentioned users, never @everyone, @here or
 *   roles. PATCH for edit-style streaming; POST typing.
 * - Pace: the runtime's send governor keeps every call within discordQuotas (quotas.ts), shared by
 *   every gateway of the bot. @discordjs/rest also keeps Discord's per-route buckets from the
 *   X-RateLimit headers and waits short known limits out itself; a 429 Discord still sends comes
 *   back as a ChannelError `rate-limit` (retryAfterMs, and the scope its X-RateLimit-Scope names)
 *   instead of being retried inside the REST client, so the governor closes that budget for every
 *   gateway. A known wait longer than `maxRestWaitMs` comes back the same way. `minSendIntervalMs`
 *   is only a small floor.
 * - Reconnects: discord.js resumes by itself; connection-monitor.ts logs an outage when it starts
 *   and when it ends (watchConnection hears both), and makes a fresh IDENTIFY after three failed resumes.
 * - Slash commands (`registerCommands`): /new /stop /status /help, see slash-commands.ts.
 */
import { createHash } from "node:crypto";
import { type ChatInputCommandInteraction, Client, Events, GatewayIntentBits, type Interaction, type Message, Partials, REST, RESTEvents, Routes } from "discord.js";
import type { Logger } from "pino";
import { type AdmissionOutcome, type ChannelAdapter, type ChannelCapabilities, type EventSink, type PlatformEvent, type SendOptions, KeyedLanes, createScrubber, scrubError, withRetries } from "../../src/gateway/kit/index.js";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { DISCORD_CDN_HOSTS, createAttachmentDownloader } from "./attachment-download.js";
import { type ConnectionStats, monitorConnection } from "./connection-monitor.js";
import { toChannelError } from "./discord-errors.js";
import { UnreadableMessageError, toPlatformEvent } from "./inbound-event.js";
import { acknowledge, commandEvent, isChatCommand, registerSlashCommands, withdraw } from "./slash-commands.js";

export const discordCapabilities: ChannelCapabilities = {
  maxMessageLength: 2000,
  streaming: "edit",
  // Edits share the channel's message bucket (5 per 5 s): one a second leaves room for the finals.
  draftIntervalMs: 1_000,
  minSendIntervalMs: 250,
};

export interface DiscordAdapterOptions {
  /** Bot token (secret): never logged, scrubbed from errors. */
  token: string;
  /** REST root without the version (https://discord.com/api); a trailing `/v10` is dropped. The gateway URL comes from GET /gateway/bot. */
  apiRoot?: string;
  /** Images larger than this become a note in the text instead of media. */
  maxImageBytes: number;
  /** Where downloaded images go (`<dataDir>/media/discord`). */
  downloadDir: string;
  /** Threads: name the parent channel in the event's `metadata.parentChatId`. */
  inheritParent?: boolean;
  logger: Logger;
  /** Downloads attachments (REST and the gateway have their own clients). Default: global fetch. */
  fetch?: typeof globalThis.fetch;
  now?: () => number;
  /** Longest 429 wait left to @discordjs/rest; longer ones are thrown as `rate-limit`. Default 5 s. */
  maxRestWaitMs?: number;
  /** How long start() waits for the gateway's READY and guilds. Default 60 s. */
  readyTimeoutMs?: number;
  /** Failed resumes in a row before a fresh IDENTIFY. Default 3. */
  maxFailedResumes?: number;
  /** Register /new /stop /status /help as slash commands on start, and take their invocations. Default false. */
  registerCommands?: boolean;
  /** First pause between hand-over attempts of an event (doubled each time; five attempts). Default 500 ms. */
  handOverBackoffMs?: number;
}

/** Told to the sender of a message that could not be handed over: Discord will not send it again. */
export const DROPPED_NOTICE = "Sorry, I could not take that message just now. Please send it again in a minute.";

export interface DiscordAdapter extends ChannelAdapter {
  /** The bot user; known once start() resolved. */
  readonly identity: { id: string; username: string } | undefined;
  /** Reconnect counters of the current connection (zeros before start). */
  connectionStats(): ConnectionStats;
}

const defaultApiRoot = "https://discord.com/api";
/** What the gateway's final close codes mean for the operator. */
const closeHints: Record<number, string> = {
  4004: ": the bot token was refused",
  4013: ": invalid intents",
  4014: ": enable the Message Content intent for the bot in the Developer Portal (Bot → Privileged Gateway Intents)",
};
const sinkAttempts = 5;

/** Discord nonces hold at most 25 characters: a hash of the key, the same for every retry of one chunk. */
export function nonceOf(idempotencyKey: string): string {
  return createHash("sha256").update(idempotencyKey).digest("base64url").slice(0, 25);
}

const allowedMentions = { parse: ["users"], replied_user: true };

export function createDiscordAdapter(options: DiscordAdapterOptions): DiscordAdapter {
  const { token, logger } = options;
  if (!token) throw new ChannelError("the Discord channel needs a bot token", "discord");
  const apiRoot = (options.apiRoot ?? defaultApiRoot).replace(/\/+$/, "").replace(/\/v\d+$/, "");
  const maxRestWaitMs = options.maxRestWaitMs ?? 5_000;
  /** Paths (`POST /channels/1/messages`) Discord just answered 429: that limit is thrown, not waited out inside the client. */
  const answered429 = new Map<string, number>();
  const restOptions = {
    api: apiRoot,
    rejectOnRateLimit: (limit: { retryAfter: number; method: string; url: string }) => {
      const key = `${limit.method.toUpperCase()} ${new URL(limit.url).pathname.replace(/^.*?\/v\d+\//, "/")}`;
      const pending = answered429.get(key) ?? 0;
      if (pending > 0) {
        if (pending === 1) answered429.delete(key);
        else answered429.set(key, pending - 1);
        return true;
      }
      return limit.retryAfter > maxRestWaitMs;
    },
  };
  // One REST client for every send, kept across gateway restarts so its rate-limit buckets stay known.
  const rest = new REST(restOptions).setToken(token);
  rest.on(RESTEvents.Response, (request, response) => {
    if (response.status !== 429) return;
    const key = `${request.method.toUpperCase()} ${request.path}`;
    answered429.set(key, (answered429.get(key) ?? 0) + 1);
    if (answered429.size > 1_000) answered429.delete(answered429.keys().next().value!);
  });
  const connectionListeners = new Set<(change: { connected: boolean; reason?: string }) => void>();
  const scrub = createScrubber([token], { replacement: "[token]" });
  const now = options.now ?? Date.now;
  const downloader = createAttachmentDownloader({
    downloadDir: options.downloadDir,
    maxImageBytes: options.maxImageBytes,
    allowedHosts: [...DISCORD_CDN_HOSTS, new URL(apiRoot).hostname],
    fetch: options.fetch ?? globalThis.fetch,
    logger,
  });

  let client: Client | undefined;
  let monitor: ReturnType<typeof monitorConnection> | undefined;
  let identity: { id: string; username: string } | undefined;
  let applicationId: string | undefined;
  let sink: EventSink | undefined;
  let lifetime = new AbortController();
  const chats = new KeyedLanes();

  async function guard<T>(operation: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw toChannelError(error, operation, scrub);
    }
  }

  function inChatOrder(chatId: string, task: () => Promise<void>): void {
    void chats.run(chatId, task).catch(() => undefined);
  }

  /** Hands the event to the sink; retried with backoff while it throws, as the gateway will not send it again. */
  async function deliver(event: PlatformEvent, signal: AbortSignal): Promise<AdmissionOutcome | undefined> {
    const fields = { channel: "discord", chatId: event.chatId, eventId: event.eventId };
    try {
      // Stopping cuts the wait short: the event is lost then, as the process is going away.
      return await withRetries(() => sink!(event), {
        attempts: sinkAttempts,
        baseDelayMs: options.handOverBackoffMs ?? 500,
        jitter: 0,
        signal,
        onRetry: (error, attempt) => logger.warn({ ...fields, attempt, error: errorMessage(error) }, "discord event hand-over failed; retrying"),
      });
    } catch (error) {
      if (signal.aborted) return undefined;
      logger.error({ ...fields, attempts: sinkAttempts, error: errorMessage(error) }, "discord event could not be handed over; dropped");
      // The sender hears it was not taken instead of silence, where the bot was addressed.
      if (event.chatType === "private" || event.mentionsBot || event.repliesToBot) {
        await adapter.send(event.chatId, DROPPED_NOTICE, { format: "plain", replyTo: event.platformMessageId, idempotencyKey: `${event.eventId}#dropped` }).catch((notice: unknown) => {
          logger.warn({ ...fields, error: errorMessage(notice) }, "could not tell the sender their message was dropped");
        });
      }
      return undefined;
    }
  }

  async function handleMessage(message: Message, signal: AbortSignal): Promise<void> {
    let event: PlatformEvent | undefined;
    try {
      event = await toPlatformEvent(message, { botId: identity!.id, inheritParent: options.inheritParent ?? false, downloader, now }, signal);
    } catch (error) {
      if (signal.aborted) return;
      const fields = { channel: "discord", type: "MESSAGE_CREATE", messageId: message.id, error: errorMessage(error) };
      if (error instanceof UnreadableMessageError) logger.warn(fields, "discord event not understood; dropped");
      else logger.error(fields, "discord event could not be read; dropped");
      return;
    }
    if (!event || signal.aborted) return;
    await deliver(event, signal);
  }

  async function handleCommand(interaction: ChatInputCommandInteraction, signal: AbortSignal): Promise<void> {
    const fields = { channel: "discord", type: "INTERACTION_CREATE", interactionId: interaction.id, command: interaction.commandName };
    let echo: string | undefined;
    try {
      // Within Discord's 3 s, before the chat's queue: what the command produces threads to this echo.
      echo = await acknowledge(rest, interaction);
    } catch (error) {
      return logger.warn({ ...fields, error: toChannelError(error, "interactionCallback", scrub).message }, "discord slash command could not be answered; dropped");
    }
    const event = commandEvent(interaction, echo ?? interaction.id, now());
    inChatOrder(event.chatId, async () => {
      const outcome = await deliver(event, signal);
      if (outcome?.startsWith("ignored:")) {
        await withdraw(rest, interaction).catch((error: unknown) => logger.debug({ ...fields, error: toChannelError(error, "deleteResponse", scrub).message }, "discord command echo not deleted"));
      }
    });
  }

  function onInteraction(interaction: Interaction): void {
    const signal = lifetime.signal;
    try {
      if (!options.registerCommands || !identity || !sink || signal.aborted) return;
      if (!interaction.isChatInputCommand() || !isChatCommand(interaction)) return;
      void handleCommand(interaction, signal).catch((error: unknown) => {
        logger.warn({ channel: "discord", type: "INTERACTION_CREATE", interactionId: interaction.id, error: errorMessage(error) }, "discord event not understood; dropped");
      });
    } catch (error) {
      logger.warn({ channel: "discord", type: "INTERACTION_CREATE", error: errorMessage(error) }, "discord event not understood; dropped");
    }
  }

  function onMessage(message: Message): void {
    const signal = lifetime.signal;
    // A listener that throws would throw inside discord.js' packet handling: nothing escapes here.
    try {
      if (!identity || !sink || signal.aborted) return;
      if (message.author?.id === identity.id) return; // our own messages come back through the gateway
      inChatOrder(String(message.channelId), () => handleMessage(message, signal));
    } catch (error) {
      logger.warn({ channel: "discord", type: "MESSAGE_CREATE", error: errorMessage(error) }, "discord event not understood; dropped");
    }
  }

  /**
   * discord.js builds its caches from every dispatch, and a malformed payload can make that throw
   * inside the socket's message handler (an unhandled rejection, which ends a Node process). The
   * packet handling is wrapped so such a packet is logged with its type and dropped.
   */
  function guardPackets(gatewayClient: Client): void {
    const manager = gatewayClient.ws as unknown as { handlePacket?: (packet?: { t?: string; s?: number }, shard?: unknown) => boolean };
    const original = manager.handlePacket?.bind(gatewayClient.ws);
    if (!original) return void logger.warn({ channel: "discord" }, "discord.js packet handling not found; malformed events are not guarded");
    manager.handlePacket = (packet, shard) => {
      try {
        return original(packet, shard);
      } catch (error) {
        scrubError(error, scrub);
        logger.warn({ channel: "discord", type: packet?.t, sequence: packet?.s, error: errorMessage(error) }, "discord event not understood; dropped");
        return true;
      }
    };
  }

  function createClient(): Client {
    const gatewayClient = new Client({
      intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.DirectMessages, GatewayIntentBits.MessageContent],
      partials: [Partials.Channel],
      rest: restOptions,
    });
    gatewayClient.on(Events.MessageCreate, onMessage);
    gatewayClient.on(Events.InteractionCreate, onInteraction);
    gatewayClient.on(Events.Error, (error) => logger.error({ channel: "discord", error: scrub(error.message) }, "discord client error"));
    gatewayClient.on(Events.Warn, (warning) => logger.warn({ channel: "discord", warning: scrub(warning) }, "discord client warning"));
    guardPackets(gatewayClient);
    return gatewayClient;
  }

  /** Logs in and waits for READY and the guilds; rejects when the gateway refuses for good (token, intents) or takes too long. */
  async function connect(gatewayClient: Client): Promise<void> {
    const timeoutMs = options.readyTimeoutMs ?? 60_000;
    let timer: NodeJS.Timeout | undefined;
    let refused: ((event: { code: number }) => void) | undefined;
    const ready = new Promise<void>((resolve, reject) => {
      gatewayClient.once(Events.ClientReady, (readyClient) => {
        // Set before discord.js replays the messages it held back until the guilds arrived.
        identity = { id: readyClient.user.id, username: readyClient.user.username };
        applicationId = readyClient.application.id;
        resolve();
      });
      // 4004: the token was refused, which trying again soon does not change (and Discord counts).
      const kindOf = (code: number) => (code === 4004 ? "auth" : "forbidden");
      refused = (event) => reject(new ChannelError(`discord gateway refused the connection (close code ${event.code}${closeHints[event.code] ?? ""})`, "discord", { kind: kindOf(event.code) }));
      gatewayClient.once(Events.ShardDisconnect, refused);
      timer = setTimeout(() => reject(new ChannelError(`discord gateway not ready after ${timeoutMs} ms`, "discord", { kind: "network" })), timeoutMs);
    });
    try {
      // Whichever fails first says why: a refusing close code comes before login's own, vaguer error.
      await Promise.all([guard("login", () => gatewayClient.login(token)), ready]);
    } finally {
      clearTimeout(timer);
      if (refused) gatewayClient.off(Events.ShardDisconnect, refused);
    }
  }

  const adapter: DiscordAdapter = {
    name: "discord",
    capabilities: discordCapabilities,
    // Discord renders the model's Markdown itself; a message it refuses goes again as the same text.
    render: (markdown) => ({ text: markdown, format: "formatted" }),
    get identity() {
      return identity;
    },
    connectionStats: () => monitor?.stats() ?? { reconnects: 0, resumes: 0, identifies: 0, invalidSessions: 0, forcedIdentifies: 0 },
    botUsername: () => identity?.username,
    watchConnection(listener) {
      connectionListeners.add(listener);
      return () => void connectionListeners.delete(listener);
    },

    async probe() {
      const me = (await guard("getCurrentUser", () => rest.get(Routes.user("@me")))) as { id: string; username: string };
      return `${me.username} (${me.id})`;
    },

    async start(eventSink) {
      if (client) throw new ChannelError("the Discord adapter is already running", "discord");
      lifetime = new AbortController();
      sink = eventSink;
      const gatewayClient = createClient();
      client = gatewayClient;
      monitor = monitorConnection(gatewayClient, {
        logger,
        maxFailedResumes: options.maxFailedResumes,
        onConnectionChange: (connected, reason) => {
          for (const listener of connectionListeners) listener({ connected, reason });
        },
      });
      try {
        await connect(gatewayClient);
      } catch (error) {
        monitor.dispose();
        client = undefined;
        await gatewayClient.destroy().catch(() => undefined);
        throw error;
      }
      if (options.registerCommands && applicationId) await registerSlashCommands(rest, applicationId, logger, (error) => toChannelError(error, "registerCommands", scrub).message);
      logger.info({ channel: "discord", bot: identity?.username, botId: identity?.id, guilds: gatewayClient.guilds.cache.size }, "discord channel started");
    },

    async stop() {
      const gatewayClient = client;
      if (!gatewayClient) return;
      client = undefined;
      lifetime.abort();
      monitor?.dispose();
      await gatewayClient.destroy();
      await chats.idle();
      logger.info({ channel: "discord" }, "discord channel stopped");
    },

    async send(chatId, text, sendOptions: SendOptions) {
      const body: Record<string, unknown> = { content: text, allowed_mentions: allowedMentions };
      if (sendOptions.replyTo) body.message_reference = { message_id: sendOptions.replyTo, fail_if_not_exists: false };
      if (sendOptions.idempotencyKey) Object.assign(body, { nonce: nonceOf(sendOptions.idempotencyKey), enforce_nonce: true });
      const message = (await guard("createMessage", () => rest.post(Routes.channelMessages(chatId), { body }))) as { id: string };
      return { platformMessageId: message.id };
    },

    async edit(chatId, platformMessageId, text) {
      await guard("editMessage", () => rest.patch(Routes.channelMessage(chatId, platformMessageId), { body: { content: text, allowed_mentions: allowedMentions } }));
    },

    async typing(chatId) {
      try {
        await rest.post(Routes.channelTyping(chatId));
      } catch (error) {
        // Best effort: a missing "typing…" is not worth failing a reply over.
        logger.debug({ channel: "discord", chatId, error: toChannelError(error, "typing", scrub).message }, "discord typing failed");
      }
    },
  };
  return adapter;
}
