/**
 * A fake Discord, spoken to by the real client (discord.js): REST v10 under `/api/v10` and a
 * WebSocket gateway (fake-discord-gateway.ts) on the same loopback port, plus a CDN path serving
 * attachments.
 *
 * ```ts
 * const discord = await startFakeDiscord({ token: "bot-token" });
 * const guild = discord.addGuild({ name: "Team" });
 * const alice = discord.user({ username: "alice" });
 * discord.sendDM({ from: alice, content: "hi" });
 * discord.sendMessage({ channelId: guild.generalId, from: alice, content: `<@${discord.botUser.id}> ping` });
 * await discord.waitFor(() => discord.sentIn(channelId)[0]);
 * discord.failNext("createMessage", { status: 429, retryAfter: 1 });
 * ```
 *
 * REST: GET /gateway/bot, GET /users/@me, GET /channels/:id, POST /channels/:id/messages (content
 * ≤ 2000, message_reference with fail_if_not_exists, nonce ≤ 25 characters; with enforce_nonce a
 * nonce seen before in the channel returns the first message and creates none), PATCH
 * /channels/:id/messages/:id, POST /channels/:id/typing. Errors are Discord's JSON (`{ message,
 * code }`); a 429 carries Retry-After, X-RateLimit-* and a body with retry_after. Every call is
 * recorded. Messages the bot creates come back to it as MESSAGE_CREATE, as on Discord.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type FakeGateway, type ResumeFailure, createFakeGateway } from "./fake-discord-gateway.js";
import { sendJson } from "./scripted-http-server.js";

export const ChannelTypes = { GuildText: 0, DM: 1, PublicThread: 11 } as const;

export interface FakeUser {
  id: string;
  username: string;
  global_name: string | null;
  discriminator: "0";
  avatar: null;
  bot?: boolean;
}

export interface FakeRole {
  id: string;
  name: string;
  managed: boolean;
  position: number;
  permissions: string;
  color: number;
  hoist: boolean;
  mentionable: boolean;
  flags: number;
  tags?: { bot_id?: string };
}

export interface FakeChannel {
  id: string;
  type: number;
  guild_id?: string;
  name?: string;
  parent_id?: string | null;
  position?: number;
  permission_overwrites?: unknown[];
  recipients?: FakeUser[];
  thread_metadata?: { archived: boolean; auto_archive_duration: number; archive_timestamp: string; locked: boolean };
  owner_id?: string;
}

export interface FakeGuild {
  id: string;
  name: string;
  roles: FakeRole[];
  channels: FakeChannel[];
  threads: FakeChannel[];
  members: Map<string, { user: FakeUser; roles: string[]; nick?: string }>;
  /** The default text channel, `general`. */
  generalId: string;
  /** The bot's managed role. */
  botRoleId: string;
}

export interface FakeAttachment {
  id: string;
  filename: string;
  size: number;
  url: string;
  proxy_url: string;
  content_type?: string;
}

/** A message as Discord's API returns it (the fields discord.js reads). */
export type FakeMessage = Record<string, unknown> & { id: string; channel_id: string; author: FakeUser; content: string };

/** What the bot has in a channel: the messages it created, with their text now. */
export interface BotMessage {
  id: string;
  channelId: string;
  content: string;
  /** Texts it had before edits, oldest first. */
  previous: string[];
  nonce?: string | number;
  replyTo?: string;
}

export type RouteName = "getGateway" | "getMe" | "getChannel" | "createMessage" | "editMessage" | "typing" | "other";

export interface RestCall {
  method: string;
  path: string;
  route: RouteName;
  body: Record<string, unknown> | undefined;
  headers: IncomingMessage["headers"];
  status: number;
  at: number;
}

/** What the next call of a route answers instead. */
export interface RestFailure {
  status: number;
  /** 429: seconds to wait (Retry-After header, retry_after in the body). Default 1. */
  retryAfter?: number;
  global?: boolean;
  code?: number;
  message?: string;
}

export interface FakeDiscordOptions {
  token: string;
  bot?: { id?: string; username?: string };
  heartbeatIntervalMs?: number;
  /** False: the app was not granted the privileged Message Content intent (the gateway closes with 4014). Default true. */
  privilegedIntents?: boolean;
}

let snowflakeCounter = 0;
/** Snowflakes as Discord makes them: milliseconds since 2015 in the high bits, a counter below. */
export function snowflake(): string {
  snowflakeCounter = (snowflakeCounter + 1) % 4096;
  return String(((BigInt(Date.now()) - 1_420_070_400_000n) << 22n) | BigInt(snowflakeCounter));
}

function readBody(incoming: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => resolve(Buffer.concat(chunks)));
    incoming.on("error", reject);
  });
}

function routeOf(method: string, path: string): { route: RouteName; params: string[] } {
  const table: Array<[string, RegExp, RouteName]> = [
    ["GET", /^\/gateway(?:\/bot)?$/, "getGateway"],
    ["GET", /^\/users\/@me$/, "getMe"],
    ["GET", /^\/channels\/(\d+)$/, "getChannel"],
    ["POST", /^\/channels\/(\d+)\/messages$/, "createMessage"],
    ["PATCH", /^\/channels\/(\d+)\/messages\/(\d+)$/, "editMessage"],
    ["POST", /^\/channels\/(\d+)\/typing$/, "typing"],
  ];
  for (const [verb, pattern, route] of table) {
    const match = method === verb ? pattern.exec(path) : null;
    if (match) return { route, params: match.slice(1) };
  }
  return { route: "other", params: [] };
}

const mentionPattern = /<@!?(\d+)>/g;
const roleMentionPattern = /<@&(\d+)>/g;

export async function startFakeDiscord(options: FakeDiscordOptions) {
  const { token } = options;
  const botUser: FakeUser = { id: options.bot?.id ?? snowflake(), username: options.bot?.username ?? "CountBot", global_name: null, discriminator: "0", avatar: null, bot: true };
  const applicationId = botUser.id;
  const users = new Map<string, FakeUser>([[botUser.id, botUser]]);
  const guilds = new Map<string, FakeGuild>();
  const channels = new Map<string, FakeChannel>();
  const messages = new Map<string, FakeMessage[]>();
  const dmChannels = new Map<string, string>();
  const attachments = new Map<string, { bytes: Buffer; contentType?: string }>();
  const botMessages: BotMessage[] = [];
  const nonces = new Map<string, FakeMessage>();
  const failures = new Map<RouteName, RestFailure[]>();
  const requests: RestCall[] = [];
  let origin = "";

  const gateway: FakeGateway = createFakeGateway({
    token,
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? 10_000,
    privilegedIntents: options.privilegedIntents ?? true,
    ready: () => ({
      user: botUser,
      guilds: [...guilds.values()].map((guild) => ({ id: guild.id, unavailable: true })),
      application: { id: applicationId, flags: 0 },
      private_channels: [],
      relationships: [],
      presences: [],
      user_settings: {},
      guild_join_requests: [],
      geo_ordered_rtc_regions: [],
    }),
    guilds: () => [...guilds.values()].map(guildPayload),
    mentionsBot: (message) => Array.isArray(message.mentions) && message.mentions.some((user) => (user as FakeUser).id === botUser.id),
  });

  function memberPayload(guild: FakeGuild, userId: string): Record<string, unknown> {
    const member = guild.members.get(userId);
    return { roles: member?.roles ?? [], nick: member?.nick ?? null, joined_at: new Date(0).toISOString(), deaf: false, mute: false, flags: 0 };
  }

  function guildPayload(guild: FakeGuild): Record<string, unknown> {
    return {
      id: guild.id,
      name: guild.name,
      icon: null,
      owner_id: botUser.id,
      roles: guild.roles,
      emojis: [],
      stickers: [],
      features: [],
      member_count: guild.members.size,
      members: [...guild.members.values()].map((member) => ({ ...memberPayload(guild, member.user.id), user: member.user })),
      channels: guild.channels,
      threads: guild.threads,
      presences: [],
      voice_states: [],
      stage_instances: [],
      guild_scheduled_events: [],
      joined_at: new Date(0).toISOString(),
      large: false,
      unavailable: false,
    };
  }

  function store(message: FakeMessage): FakeMessage {
    const list = messages.get(message.channel_id) ?? [];
    list.push(message);
    messages.set(message.channel_id, list);
    return message;
  }

  function findMessage(channelId: string, messageId: string): FakeMessage | undefined {
    return messages.get(channelId)?.find((message) => message.id === messageId);
  }

  /** A message object as Discord builds it: mentions found in the text, the reply's target embedded. */
  function buildMessage(input: { channel: FakeChannel; author: FakeUser; content: string; replyTo?: FakeMessage; replyPing?: boolean; attachments?: FakeAttachment[]; nonce?: string | number }): FakeMessage {
    const { channel, author } = input;
    const mentioned = [...input.content.matchAll(mentionPattern)].map((match) => users.get(match[1]!)).filter((user): user is FakeUser => user !== undefined);
    // A reply pings its target unless the sender turned that off: Discord lists the target among the mentions.
    if (input.replyTo && input.replyPing !== false && !mentioned.some((user) => user.id === input.replyTo!.author.id)) mentioned.push(input.replyTo.author);
    const guild = channel.guild_id ? guilds.get(channel.guild_id) : undefined;
    const message: FakeMessage = {
      id: snowflake(),
      type: input.replyTo ? 19 : 0,
      channel_id: channel.id,
      author,
      content: input.content,
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: /@(everyone|here)\b/.test(input.content),
      mentions: mentioned.map((user) => (guild ? { ...user, member: memberPayload(guild, user.id) } : user)),
      mention_roles: [...input.content.matchAll(roleMentionPattern)].map((match) => match[1]!),
      attachments: input.attachments ?? [],
      embeds: [],
      pinned: false,
      flags: 0,
      components: [],
    };
    if (input.nonce !== undefined) message.nonce = input.nonce;
    if (guild) {
      message.guild_id = guild.id;
      message.member = memberPayload(guild, author.id);
    } else {
      message.channel_type = channel.type;
    }
    if (input.replyTo) {
      message.message_reference = { type: 0, message_id: input.replyTo.id, channel_id: channel.id, ...(guild ? { guild_id: guild.id } : {}) };
      message.referenced_message = input.replyTo;
    }
    return message;
  }

  function dmChannelOf(user: FakeUser): FakeChannel {
    let id = dmChannels.get(user.id);
    if (!id) {
      id = snowflake();
      dmChannels.set(user.id, id);
      channels.set(id, { id, type: ChannelTypes.DM, recipients: [user] });
    }
    return channels.get(id)!;
  }

  function discordError(response: ServerResponse, status: number, code: number, message: string, extra: Record<string, unknown> = {}): void {
    sendJson(response, status, { message, code, ...extra });
  }

  function rateLimited(response: ServerResponse, failure: RestFailure): void {
    const retryAfter = failure.retryAfter ?? 1;
    const headers: Record<string, string> = {
      "retry-after": String(Math.ceil(retryAfter)),
      "x-ratelimit-limit": "5",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": String(Date.now() / 1000 + retryAfter),
      "x-ratelimit-reset-after": String(retryAfter),
      "x-ratelimit-bucket": "fake-bucket-messages",
      "x-ratelimit-scope": failure.global ? "global" : "user",
    };
    if (failure.global) headers["x-ratelimit-global"] = "true";
    sendJson(response, 429, { message: failure.message ?? "You are being rate limited.", retry_after: retryAfter, global: failure.global ?? false }, headers);
  }

  function createMessage(channelId: string, body: Record<string, unknown>, response: ServerResponse): void {
    const channel = channels.get(channelId);
    if (!channel) return discordError(response, 404, 10003, "Unknown Channel");
    const content = typeof body.content === "string" ? body.content : "";
    if (content.length > 2000) {
      return discordError(response, 400, 50035, "Invalid Form Body", { errors: { content: { _errors: [{ code: "BASE_TYPE_MAX_LENGTH", message: "Must be 2000 or fewer in length." }] } } });
    }
    if (content.trim() === "") return discordError(response, 400, 50006, "Cannot send an empty message");
    const nonce = body.nonce as string | number | undefined;
    if (nonce !== undefined && (typeof nonce === "string" ? nonce.length > 25 : !Number.isSafeInteger(nonce))) {
      return discordError(response, 400, 50035, "Invalid Form Body", { errors: { nonce: { _errors: [{ code: "BASE_TYPE_MAX_LENGTH", message: "Must be 25 or fewer in length." }] } } });
    }
    const nonceKey = `${channelId}:${String(nonce)}`;
    if (nonce !== undefined && body.enforce_nonce === true && nonces.has(nonceKey)) return sendJson(response, 200, nonces.get(nonceKey));
    const reference = body.message_reference as { message_id?: string; fail_if_not_exists?: boolean } | undefined;
    let replyTo: FakeMessage | undefined;
    if (reference?.message_id) {
      replyTo = findMessage(channelId, reference.message_id);
      if (!replyTo && reference.fail_if_not_exists !== false) {
        return discordError(response, 400, 50035, "Invalid Form Body", { errors: { message_reference: { _errors: [{ code: "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", message: "Unknown message" }] } } });
      }
    }
    const message = store(buildMessage({ channel, author: botUser, content, replyTo, replyPing: false, nonce }));
    if (nonce !== undefined) nonces.set(nonceKey, message);
    botMessages.push({ id: message.id, channelId, content, previous: [], nonce, replyTo: replyTo?.id });
    sendJson(response, 200, message);
    gateway.dispatch("MESSAGE_CREATE", message);
  }

  function editMessage(channelId: string, messageId: string, body: Record<string, unknown>, response: ServerResponse): void {
    if (!channels.has(channelId)) return discordError(response, 404, 10003, "Unknown Channel");
    const message = findMessage(channelId, messageId);
    if (!message) return discordError(response, 404, 10008, "Unknown Message");
    if (message.author.id !== botUser.id) return discordError(response, 403, 50005, "Cannot edit a message authored by another user");
    if (typeof body.content === "string") {
      if (body.content.length > 2000) return discordError(response, 400, 50035, "Invalid Form Body", { errors: { content: { _errors: [{ code: "BASE_TYPE_MAX_LENGTH", message: "Must be 2000 or fewer in length." }] } } });
      const mine = botMessages.find((item) => item.id === messageId)!;
      mine.previous.push(mine.content);
      mine.content = body.content;
      message.content = body.content;
      message.edited_timestamp = new Date().toISOString();
    }
    sendJson(response, 200, message);
    gateway.dispatch("MESSAGE_UPDATE", message);
  }

  async function handle(incoming: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(incoming.url ?? "/", origin);
    const raw = await readBody(incoming);
    if (url.pathname.startsWith("/attachments/")) {
      const file = attachments.get(url.pathname.split("/")[2] ?? "");
      if (!file) return void response.writeHead(404).end();
      response.writeHead(200, { "content-type": file.contentType ?? "application/octet-stream", "content-length": String(file.bytes.length) });
      return void response.end(file.bytes);
    }
    if (!url.pathname.startsWith("/api/v10/")) return discordError(response, 404, 0, "404: Not Found");
    const path = url.pathname.slice("/api/v10".length);
    const method = incoming.method ?? "GET";
    const { route, params } = routeOf(method, path);
    let body: Record<string, unknown> | undefined;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
      } catch {
        return discordError(response, 400, 50109, "The request body contains invalid JSON.");
      }
    }
    const call: RestCall = { method, path, route, body, headers: incoming.headers, status: 0, at: Date.now() };
    requests.push(call);
    response.on("finish", () => (call.status = response.statusCode));
    if (incoming.headers.authorization !== `Bot ${token}`) return discordError(response, 401, 0, "401: Unauthorized");
    const failure = failures.get(route)?.shift();
    if (failure) {
      if (failure.status === 429) return rateLimited(response, failure);
      return discordError(response, failure.status, failure.code ?? 0, failure.message ?? `${failure.status}: failure`);
    }
    switch (route) {
      case "getGateway":
        return sendJson(response, 200, { url: `${origin.replace(/^http/, "ws")}/gateway`, shards: 1, session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 } });
      case "getMe":
        return sendJson(response, 200, botUser);
      case "getChannel": {
        const channel = channels.get(params[0]!);
        return channel ? sendJson(response, 200, channel) : discordError(response, 404, 10003, "Unknown Channel");
      }
      case "createMessage":
        return createMessage(params[0]!, body ?? {}, response);
      case "editMessage":
        return editMessage(params[0]!, params[1]!, body ?? {}, response);
      case "typing":
        if (!channels.has(params[0]!)) return discordError(response, 404, 10003, "Unknown Channel");
        return void response.writeHead(204).end();
      default:
        return discordError(response, 404, 0, "404: Not Found");
    }
  }

  const http = createServer((incoming, response) => {
    handle(incoming, response).catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 500, { message: `fake discord: ${String(error)}`, code: 0 });
    });
  });
  http.on("upgrade", (incoming, socket, head) => gateway.handleUpgrade(incoming, socket, head));
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  gateway.setOrigin(origin.replace(/^http/, "ws"));

  function textChannel(guild: FakeGuild, name: string): FakeChannel {
    const channel: FakeChannel = { id: snowflake(), type: ChannelTypes.GuildText, guild_id: guild.id, name, parent_id: null, position: guild.channels.length, permission_overwrites: [] };
    guild.channels.push(channel);
    channels.set(channel.id, channel);
    return channel;
  }

  const fake = {
    /** discord.js' `rest.api`: `http://127.0.0.1:<port>/api`. */
    apiRoot: `${origin}/api`,
    origin,
    botUser,
    applicationId,
    requests,
    gateway,
    user(fields: { username: string; id?: string; bot?: boolean; globalName?: string }): FakeUser {
      const user: FakeUser = { id: fields.id ?? snowflake(), username: fields.username, global_name: fields.globalName ?? null, discriminator: "0", avatar: null };
      if (fields.bot) user.bot = true;
      users.set(user.id, user);
      return user;
    },
    /** A guild with a `general` text channel, the @everyone role and the bot's managed role; the bot is a member. */
    addGuild(fields: { name?: string } = {}): FakeGuild {
      const id = snowflake();
      const role = (roleId: string, name: string, extra: Partial<FakeRole> = {}): FakeRole => ({ id: roleId, name, managed: false, position: 0, permissions: "0", color: 0, hoist: false, mentionable: false, flags: 0, ...extra });
      const botRoleId = snowflake();
      const guild: FakeGuild = {
        id,
        name: fields.name ?? "Guild",
        roles: [role(id, "@everyone"), role(botRoleId, botUser.username, { managed: true, position: 1, tags: { bot_id: botUser.id } })],
        channels: [],
        threads: [],
        members: new Map([[botUser.id, { user: botUser, roles: [botRoleId] }]]),
        generalId: "",
        botRoleId,
      };
      guild.generalId = textChannel(guild, "general").id;
      guilds.set(id, guild);
      return guild;
    },
    addTextChannel(guild: FakeGuild, name: string): FakeChannel {
      const channel = textChannel(guild, name);
      gateway.dispatch("CHANNEL_CREATE", channel as unknown as Record<string, unknown>);
      return channel;
    },
    /** A public thread under a text channel; connected clients get THREAD_CREATE. */
    addThread(guild: FakeGuild, parentId: string, name: string): FakeChannel {
      const thread: FakeChannel = {
        id: snowflake(),
        type: ChannelTypes.PublicThread,
        guild_id: guild.id,
        name,
        parent_id: parentId,
        owner_id: botUser.id,
        thread_metadata: { archived: false, auto_archive_duration: 1440, archive_timestamp: new Date().toISOString(), locked: false },
      };
      guild.threads.push(thread);
      channels.set(thread.id, thread);
      gateway.dispatch("THREAD_CREATE", { ...thread, newly_created: true });
      return thread;
    },
    addRole(guild: FakeGuild, name: string): FakeRole {
      const role: FakeRole = { id: snowflake(), name, managed: false, position: guild.roles.length, permissions: "0", color: 0, hoist: false, mentionable: true, flags: 0 };
      guild.roles.push(role);
      return role;
    },
    /** Makes the user a member (with roles); set up guilds before the client connects, as their GUILD_CREATE carries members. */
    addMember(guild: FakeGuild, user: FakeUser, roles: string[] = [], nick?: string): void {
      guild.members.set(user.id, { user, roles, ...(nick ? { nick } : {}) });
    },
    /** A file served under this server's CDN path, for a message's attachments. */
    attachment(bytes: Buffer, fields: { filename: string; contentType?: string; declaredSize?: number }): FakeAttachment {
      const id = snowflake();
      attachments.set(id, { bytes, contentType: fields.contentType });
      const url = `${origin}/attachments/${id}/${encodeURIComponent(fields.filename)}`;
      return { id, filename: fields.filename, size: fields.declaredSize ?? bytes.length, url, proxy_url: url, ...(fields.contentType ? { content_type: fields.contentType } : {}) };
    },
    /** A DM from the user to the bot (its DM channel is made on first use). */
    sendDM(input: { from: FakeUser; content: string; attachments?: FakeAttachment[]; replyTo?: FakeMessage }): FakeMessage {
      const message = store(buildMessage({ channel: dmChannelOf(input.from), author: input.from, content: input.content, attachments: input.attachments, replyTo: input.replyTo }));
      gateway.dispatch("MESSAGE_CREATE", message);
      return message;
    },
    /** A message in a guild channel or thread. Mentions (`<@id>`, `<@&id>`, @everyone) are found in the text. */
    sendMessage(input: { channelId: string; from: FakeUser; content: string; replyTo?: FakeMessage; replyPing?: boolean; attachments?: FakeAttachment[] }): FakeMessage {
      const channel = channels.get(input.channelId);
      if (!channel) throw new Error(`fake discord: no channel ${input.channelId}`);
      const message = store(buildMessage({ channel, author: input.from, content: input.content, replyTo: input.replyTo, replyPing: input.replyPing, attachments: input.attachments }));
      gateway.dispatch("MESSAGE_CREATE", message);
      return message;
    },
    /** Dispatches a raw event, e.g. a malformed one. */
    dispatch(type: string, payload: Record<string, unknown>): void {
      gateway.dispatch(type, payload);
    },
    /** Sends an earlier message's MESSAGE_CREATE again (to whichever session is connected now). */
    replay(message: FakeMessage): void {
      gateway.dispatch("MESSAGE_CREATE", message);
    },
    dmChannelId: (user: FakeUser) => dmChannelOf(user).id,
    messageOf: (channelId: string, messageId: string) => findMessage(channelId, messageId),
    /** The bot's messages in a channel, in the order it created them. */
    sentIn: (channelId: string): BotMessage[] => botMessages.filter((message) => message.channelId === channelId),
    /** The next call of `route` is answered with this failure. */
    failNext(route: RouteName, failure: RestFailure): void {
      failures.set(route, [...(failures.get(route) ?? []), failure]);
    },
    dropConnections: (code?: number) => gateway.dropConnections(code),
    invalidateSessions: (resumable = false) => gateway.invalidateSessions(resumable),
    failResumes: (count: number, how: ResumeFailure) => gateway.failResumes(count, how),
    /** IDENTIFY and RESUME frames received, in order. */
    handshakes: () => gateway.received.filter((frame) => frame.op === 2 || frame.op === 6).map((frame) => (frame.op === 2 ? "identify" : "resume")),
    async waitFor<T>(predicate: () => T | undefined | null | false, options: { timeoutMs?: number; what?: string } = {}): Promise<T> {
      const deadline = Date.now() + (options.timeoutMs ?? 10_000);
      for (;;) {
        const value = predicate();
        if (value) return value;
        if (Date.now() > deadline) throw new Error(`fake discord: timed out waiting for ${options.what ?? "a condition"}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    close(): Promise<void> {
      gateway.close();
      return new Promise((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      });
    },
  };
  return fake;
}

export type FakeDiscordServer = Awaited<ReturnType<typeof startFakeDiscord>>;
