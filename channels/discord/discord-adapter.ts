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
 *   gateway. A known wait longer than `maxRestWaitMs` comes back the same way. No
 *   `minSendIntervalMs`: the governor's channel budget paces.
 * - Reconnects: discord.js resumes by itself; connection-monitor.ts logs an outage when it starts
 *   and when it ends (watchConnection hears both), and makes a fresh IDENTIFY after three failed resumes.
 * - Slash commands (`registerCommands`): /new /stop /status /help, see slash-commands.ts.
 */
import { createHash } from "node:crypto";
import { Client, Events, GatewayIntentBits, Partials, REST, RESTEvents, Routes } from "discord.js";
import type { Logger } from "pino";
import { type ChannelAdapter, type ChannelCapabilities, type Scrub, type SendOptions, createScrubber, scrubError } from "../../src/gateway/kit/index.js";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { DISCORD_CDN_HOSTS, createAttachmentDownloader } from "./attachment-download.js";
import { type ConnectionStats, monitorConnection } from "./connection-monitor.js";
import { toChannelError } from "./discord-errors.js";
import { DROPPED_NOTICE, DiscordInbound, type DiscordInboundOptions } from "./inbound-handler.js";
import { registerSlashCommands } from "./slash-commands.js";

export { DROPPED_NOTICE };

export const discordCapabilities: ChannelCapabilities = {
  maxMessageLength: 2000,
  streaming: "edit",
  // Edits share the channel's message bucket (5 per 5 s): one a second leaves room for the finals.
  draftIntervalMs: 1_000,
  // The send governor keeps the channel's 5 per 5 s: a floor here would only spread a busy
  // channel's burst of five over a second, and every later five with it.
  minSendIntervalMs: 0,
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

/** Discord nonces hold at most 25 characters: a hash of the key, the same for every retry of one chunk. */
export function nonceOf(idempotencyKey: string): string {
  return createHash("sha256").update(idempotencyKey).digest("base64url").slice(0, 25);
}

const allowedMentions = { parse: ["users"], replied_user: true };

/** The REST client every send goes through, and the options the gateway's own client is built with. */
interface DiscordRest {
  rest: REST;
  restOptions: { api: string; rejectOnRateLimit: (limit: { retryAfter: number; method: string; url: string }) => boolean };
}

/**
 * One REST client for every send, kept across gateway restarts so its rate-limit buckets stay
 * known. A path Discord just answered 429 has that limit thrown instead of waited out inside the
 * client (the send governor closes the budget for every gateway); so is a known wait longer than
 * `maxRestWaitMs`.
 */
function createDiscordRest(token: string, apiRoot: string, maxRestWaitMs: number): DiscordRest {
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
  const rest = new REST(restOptions).setToken(token);
  rest.on(RESTEvents.Response, (request, response) => {
    if (response.status !== 429) return;
    const key = `${request.method.toUpperCase()} ${request.path}`;
    answered429.set(key, (answered429.get(key) ?? 0) + 1);
    if (answered429.size > 1_000) answered429.delete(answered429.keys().next().value!);
  });
  return { rest, restOptions };
}

/**
 * discord.js builds its caches from every dispatch, and a malformed payload can make that throw
 * inside the socket's message handler (an unhandled rejection, which ends a Node process). The
 * packet handling is wrapped so such a packet is logged with its type and dropped.
 */
function guardPackets(gatewayClient: Client, logger: Logger, scrub: Scrub): void {
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

/** A gateway client whose message and interaction events go to `inbound`, its errors and warnings to the log. */
function createGatewayClient(restOptions: DiscordRest["restOptions"], inbound: DiscordInbound, logger: Logger, scrub: Scrub): Client {
  const gatewayClient = new Client({
    intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.DirectMessages, GatewayIntentBits.MessageContent],
    partials: [Partials.Channel],
    rest: restOptions,
  });
  gatewayClient.on(Events.MessageCreate, inbound.onMessage);
  gatewayClient.on(Events.InteractionCreate, inbound.onInteraction);
  gatewayClient.on(Events.Error, (error) => logger.error({ channel: "discord", error: scrub(error.message) }, "discord client error"));
  gatewayClient.on(Events.Warn, (warning) => logger.warn({ channel: "discord", warning: scrub(warning) }, "discord client warning"));
  guardPackets(gatewayClient, logger, scrub);
  return gatewayClient;
}

/**
 * Logs in and waits for READY and the guilds; rejects when the gateway refuses for good (token,
 * intents) or takes too long. `onReady` runs before discord.js replays the messages it held back
 * until the guilds arrived, so they meet a known identity. Resolves with the application id.
 */
async function connectGateway(
  gatewayClient: Client,
  login: () => Promise<unknown>,
  timeoutMs: number,
  onReady: (identity: { id: string; username: string }) => void,
): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  let refused: ((event: { code: number }) => void) | undefined;
  let applicationId = "";
  const ready = new Promise<void>((resolve, reject) => {
    gatewayClient.once(Events.ClientReady, (readyClient) => {
      onReady({ id: readyClient.user.id, username: readyClient.user.username });
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
    await Promise.all([login(), ready]);
  } finally {
    clearTimeout(timer);
    if (refused) gatewayClient.off(Events.ShardDisconnect, refused);
  }
  return applicationId;
}

/** Runs one REST or gateway call; what it throws comes back as a scrubbed ChannelError naming the operation. */
async function guarded<T>(operation: string, call: () => Promise<T>, scrub: Scrub): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw toChannelError(error, operation, scrub);
  }
}

/** A gateway being opened: its client and monitor at once (so stop() can reach them), and when it is ready. */
interface OpeningGateway {
  client: Client;
  monitor: ReturnType<typeof monitorConnection>;
  /** Resolves once READY came and the slash commands are registered; on failure the client is already destroyed. */
  ready: Promise<void>;
}

/**
 * Creates the gateway client with its connection monitor, logs in and waits for READY, then
 * registers the slash commands when asked to. A refused or late connection destroys the client
 * before the error comes back, so a failed start leaves nothing running.
 */
function openGateway(
  options: DiscordAdapterOptions,
  parts: { rest: REST; restOptions: DiscordRest["restOptions"]; inbound: DiscordInbound; scrub: Scrub; onConnectionChange: (connected: boolean, reason?: string) => void },
): OpeningGateway {
  const { logger, token } = options;
  const { rest, inbound, scrub } = parts;
  const client = createGatewayClient(parts.restOptions, inbound, logger, scrub);
  const monitor = monitorConnection(client, { logger, maxFailedResumes: options.maxFailedResumes, onConnectionChange: parts.onConnectionChange });
  const ready = (async () => {
    let applicationId: string;
    try {
      const login = () => guarded("login", () => client.login(token), scrub);
      applicationId = await connectGateway(client, login, options.readyTimeoutMs ?? 60_000, (identity) => (inbound.identity = identity));
    } catch (error) {
      monitor.dispose();
      await client.destroy().catch(() => undefined);
      throw error;
    }
    if (options.registerCommands && applicationId) await registerSlashCommands(rest, applicationId, logger, (error) => toChannelError(error, "registerCommands", scrub).message);
    logger.info({ channel: "discord", bot: inbound.identity?.username, botId: inbound.identity?.id, guilds: client.guilds.cache.size }, "discord channel started");
  })();
  return { client, monitor, ready };
}

/**
 * POSTs one message: a reply references the original without failing when it was deleted, and the
 * idempotency key becomes an enforced nonce, so Discord answers a repeat with the first message.
 */
async function postMessage(rest: REST, chatId: string, text: string, sendOptions: SendOptions, scrub: Scrub): Promise<{ platformMessageId: string }> {
  const body: Record<string, unknown> = { content: text, allowed_mentions: allowedMentions };
  if (sendOptions.replyTo) body.message_reference = { message_id: sendOptions.replyTo, fail_if_not_exists: false };
  if (sendOptions.idempotencyKey) Object.assign(body, { nonce: nonceOf(sendOptions.idempotencyKey), enforce_nonce: true });
  const message = (await guarded("createMessage", () => rest.post(Routes.channelMessages(chatId), { body }), scrub)) as { id: string };
  return { platformMessageId: message.id };
}

/** The inbound half with its attachment downloader, which may fetch from Discord's CDN and the API host only. */
function createInbound(options: DiscordAdapterOptions, parts: { apiRoot: string; rest: REST; scrub: Scrub; send: DiscordInboundOptions["send"] }): DiscordInbound {
  const { logger } = options;
  const downloader = createAttachmentDownloader({
    downloadDir: options.downloadDir,
    maxImageBytes: options.maxImageBytes,
    allowedHosts: [...DISCORD_CDN_HOSTS, new URL(parts.apiRoot).hostname],
    fetch: options.fetch ?? globalThis.fetch,
    logger,
  });
  return new DiscordInbound({
    rest: parts.rest,
    logger,
    scrub: parts.scrub,
    downloader,
    now: options.now ?? Date.now,
    send: parts.send,
    inheritParent: options.inheritParent ?? false,
    registerCommands: options.registerCommands ?? false,
    handOverBackoffMs: options.handOverBackoffMs ?? 500,
  });
}

export function createDiscordAdapter(options: DiscordAdapterOptions): DiscordAdapter {
  const { token, logger } = options;
  if (!token) throw new ChannelError("the Discord channel needs a bot token", "discord");
  const apiRoot = (options.apiRoot ?? defaultApiRoot).replace(/\/+$/, "").replace(/\/v\d+$/, "");
  const { rest, restOptions } = createDiscordRest(token, apiRoot, options.maxRestWaitMs ?? 5_000);
  const connectionListeners = new Set<(change: { connected: boolean; reason?: string }) => void>();
  const scrub = createScrubber([token], { replacement: "[token]" });
  const inbound = createInbound(options, { apiRoot, rest, scrub, send: (chatId, text, sendOptions) => adapter.send(chatId, text, sendOptions) });

  let client: Client | undefined;
  let monitor: ReturnType<typeof monitorConnection> | undefined;

  const guard = <T>(operation: string, call: () => Promise<T>) => guarded(operation, call, scrub);

  const adapter: DiscordAdapter = {
    name: "discord",
    capabilities: discordCapabilities,
    // Discord renders the model's Markdown itself; a message it refuses goes again as the same text.
    render: (markdown) => ({ text: markdown, format: "formatted" }),
    get identity() {
      return inbound.identity;
    },
    connectionStats: () => monitor?.stats() ?? { reconnects: 0, resumes: 0, identifies: 0, invalidSessions: 0, forcedIdentifies: 0 },
    botUsername: () => inbound.identity?.username,
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
      inbound.lifetime = new AbortController();
      inbound.sink = eventSink;
      const onConnectionChange = (connected: boolean, reason?: string) => {
        for (const listener of connectionListeners) listener({ connected, reason });
      };
      const opening = openGateway(options, { rest, restOptions, inbound, scrub, onConnectionChange });
      client = opening.client;
      monitor = opening.monitor;
      try {
        await opening.ready;
      } catch (error) {
        client = undefined;
        throw error;
      }
    },

    async stop() {
      const gatewayClient = client;
      if (!gatewayClient) return;
      client = undefined;
      inbound.lifetime.abort();
      monitor?.dispose();
      await gatewayClient.destroy();
      await inbound.idle();
      logger.info({ channel: "discord" }, "discord channel stopped");
    },

    send: (chatId, text, sendOptions: SendOptions) => postMessage(rest, chatId, text, sendOptions, scrub),

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
