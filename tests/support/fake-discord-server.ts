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
 * code }`); a 429 carries Retry-After, X-RateLimit-* and a body with retry_after (sent on demand,
 * or by the `limits` the fake enforces: DISCORD_PUBLISHED_LIMITS are Discord's; `FAKE_LIMIT_DEBUG=1`
 * prints each refusal with its budget and the calls in its window, sliding-limits.ts). Every call is
 * recorded. Messages the bot creates come back to it as MESSAGE_CREATE, as on Discord. Slash
 * commands: PUT /applications/:id/commands, INTERACTION_CREATE from {@link sendCommand}, POST
 * /interactions/:id/:token/callback (once, within 3 s; `with_response` returns the message) and
 * DELETE /webhooks/:app/:token/messages/@original, the last two without the bot's Authorization.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type FakeGateway, type ResumeFailure, createFakeGateway } from "./fake-discord-gateway.js";
import {
  type BotMessage,
  ChannelTypes,
  type FakeAttachment,
  type FakeChannel,
  type FakeDiscordOptions,
  type FakeGuild,
  type FakeMessage,
  type FakeRole,
  type FakeUser,
  IS_VOICE_MESSAGE,
  type RestCall,
  type RestFailure,
  type RouteName,
  readBody,
  routeOf,
  snowflake,
} from "./fake-discord-model.js";
import { sendJson } from "./scripted-http-server.js";
import { SlidingLimits, logRefusal } from "./sliding-limits.js";

export * from "./fake-discord-model.js";

// Discord parses mentions the way its Markdown renders them: not when escaped (`\<@id>`), not
// inside inline code or a code block. Mentions are found in what is left outside code.
const mentionPattern = /(?<!\\)<@!?(\d+)>/g;
const roleMentionPattern = /(?<!\\)<@&(\d+)>/g;
const everyonePattern = /(?<!\\)@(everyone|here)\b/;

/** The text outside code blocks and inline code, where Discord looks for mentions. */
function outsideCode(content: string): string {
  return content.replace(/```[\s\S]*?```/g, " ").replace(/(`+)[\s\S]*?\1/g, " ");
}

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
  const interactions = new Map<string, { token: string; channelId: string; name: string; user: FakeUser; at: number; response?: FakeMessage }>();
  const commands: Array<Record<string, unknown>> = [];
  let origin = "";
  const limiter = new SlidingLimits();
  let rateLimitedCalls = 0;

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
  function buildMessage(input: { channel: FakeChannel; author: FakeUser; content: string; replyTo?: FakeMessage; replyPing?: boolean; attachments?: FakeAttachment[]; nonce?: string | number; flags?: number }): FakeMessage {
    const { channel, author } = input;
    const parsed = outsideCode(input.content);
    const mentioned = [...parsed.matchAll(mentionPattern)].map((match) => users.get(match[1]!)).filter((user): user is FakeUser => user !== undefined);
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
      mention_everyone: everyonePattern.test(parsed),
      mentions: mentioned.map((user) => (guild ? { ...user, member: memberPayload(guild, user.id) } : user)),
      mention_roles: [...parsed.matchAll(roleMentionPattern)].map((match) => match[1]!),
      attachments: input.attachments ?? [],
      embeds: [],
      pinned: false,
      flags: input.flags ?? 0,
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

  function interactionCallback(id: string, interactionToken: string, body: Record<string, unknown>, withResponse: boolean, response: ServerResponse): void {
    const interaction = interactions.get(id);
    // Discord forgets an interaction nobody answered within 3 s.
    if (!interaction || interaction.token !== interactionToken || Date.now() - interaction.at > 3_000) return discordError(response, 404, 10062, "Unknown interaction");
    if (interaction.response) return discordError(response, 400, 40060, "Interaction has already been acknowledged.");
    if (body.type !== 4) return discordError(response, 400, 50035, "Invalid Form Body");
    const data = (body.data ?? {}) as { content?: string };
    const message = store(buildMessage({ channel: channels.get(interaction.channelId)!, author: botUser, content: data.content ?? "" }));
    message.type = 20;
    message.interaction_metadata = { id, type: 2, user: interaction.user, name: interaction.name };
    interaction.response = message;
    botMessages.push({ id: message.id, channelId: interaction.channelId, content: message.content, previous: [], command: interaction.name });
    if (withResponse) sendJson(response, 200, { interaction: { id, type: 2, response_message_id: message.id, response_message_loading: false, response_message_ephemeral: false }, resource: { type: 4, message } });
    else response.writeHead(204).end();
    gateway.dispatch("MESSAGE_CREATE", message);
  }

  function deleteResponse(interactionToken: string, which: string, response: ServerResponse): void {
    const interaction = [...interactions.values()].find((entry) => entry.token === interactionToken);
    const message = interaction?.response;
    if (!interaction || !message || (which !== "@original" && which !== message.id)) return discordError(response, 404, 10008, "Unknown Message");
    const list = messages.get(message.channel_id) ?? [];
    list.splice(list.indexOf(message), 1);
    botMessages.splice(botMessages.findIndex((item) => item.id === message.id), 1);
    response.writeHead(204).end();
    gateway.dispatch("MESSAGE_DELETE", { id: message.id, channel_id: message.channel_id, ...(message.guild_id ? { guild_id: message.guild_id } : {}) });
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
    // Interaction callbacks and their webhook carry the interaction's token in the URL instead.
    const tokenInUrl = route === "interactionCallback" || route === "deleteResponse";
    if (!tokenInUrl && incoming.headers.authorization !== `Bot ${token}`) return discordError(response, 401, 0, "401: Unauthorized");
    const limits = options.limits;
    if (limits && !tokenInUrl) {
      const inChannel = route === "createMessage" || route === "editMessage";
      const now = Date.now();
      const label = `${route} ${method} ${path}`;
      const broken = limiter.hit(
        [
          [`channel:${params[0]}`, inChannel ? limits.channel : undefined],
          ["bot", limits.bot],
        ],
        now,
        label,
      );
      if (broken) {
        rateLimitedCalls += 1;
        logRefusal("discord", label, broken, now);
        return rateLimited(response, { status: 429, retryAfter: Math.max(0.001, broken.retryAfterMs / 1000), global: broken.key === "bot" });
      }
    }
    const failure = failures.get(route)?.shift();
    if (failure) {
      if (failure.status === 429) return rateLimited(response, failure);
      return discordError(response, failure.status, failure.code ?? 0, failure.message ?? `${failure.status}: failure`, failure.errors === undefined ? undefined : { errors: failure.errors });
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
      case "putCommands":
        if (params[0] !== applicationId) return discordError(response, 404, 10002, "Unknown Application");
        commands.splice(0, commands.length, ...((Array.isArray(body) ? body : []) as Array<Record<string, unknown>>).map((command) => ({ ...command, id: snowflake(), application_id: applicationId, version: snowflake() })));
        return sendJson(response, 200, commands);
      case "interactionCallback":
        return interactionCallback(params[0]!, params[1]!, body ?? {}, url.searchParams.get("with_response") === "true", response);
      case "deleteResponse":
        return deleteResponse(params[1]!, params[2]!, response);
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
    /** Calls answered 429 because they broke a budget of `limits`. */
    get rateLimited() {
      return rateLimitedCalls;
    },
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
    attachment(bytes: Buffer, fields: { filename: string; contentType?: string; declaredSize?: number; durationSecs?: number }): FakeAttachment {
      const id = snowflake();
      attachments.set(id, { bytes, contentType: fields.contentType });
      const url = `${origin}/attachments/${id}/${encodeURIComponent(fields.filename)}`;
      const voice = fields.durationSecs === undefined ? {} : { duration_secs: fields.durationSecs, waveform: Buffer.alloc(8, 128).toString("base64") };
      return { id, filename: fields.filename, size: fields.declaredSize ?? bytes.length, url, proxy_url: url, ...(fields.contentType ? { content_type: fields.contentType } : {}), ...voice };
    },
    /** A voice message in a DM, as the Discord client sends one: flag IS_VOICE_MESSAGE, no text, one `voice-message.ogg`. */
    sendVoiceDM(input: { from: FakeUser; bytes: Buffer; durationSecs: number }): FakeMessage {
      const recording = fake.attachment(input.bytes, { filename: "voice-message.ogg", contentType: "audio/ogg", durationSecs: input.durationSecs });
      const message = store(buildMessage({ channel: dmChannelOf(input.from), author: input.from, content: "", attachments: [recording], flags: IS_VOICE_MESSAGE }));
      gateway.dispatch("MESSAGE_CREATE", message);
      return message;
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
    /** The slash commands the bot registered (PUT /applications/:id/commands). */
    commands,
    /**
     * A slash command invoked by the user in a guild channel or thread, or in their DM with the bot
     * when `channelId` is left out.
     */
    sendCommand(input: { from: FakeUser; name: string; channelId?: string }): { id: string; token: string } {
      const channel = input.channelId ? channels.get(input.channelId) : dmChannelOf(input.from);
      if (!channel) throw new Error(`fake discord: no channel ${input.channelId}`);
      const guild = channel.guild_id ? guilds.get(channel.guild_id) : undefined;
      const id = snowflake();
      const interactionToken = `interaction-${id}`;
      interactions.set(id, { token: interactionToken, channelId: channel.id, name: input.name, user: input.from, at: Date.now() });
      const command = commands.find((entry) => entry.name === input.name);
      const payload: Record<string, unknown> = {
        id,
        application_id: applicationId,
        type: 2,
        token: interactionToken,
        version: 1,
        data: { id: command?.id ?? snowflake(), name: input.name, type: 1 },
        channel: channel.type === ChannelTypes.DM ? { ...channel, recipients: [input.from] } : channel,
        channel_id: channel.id,
        app_permissions: "0",
        locale: "en-US",
        entitlements: [],
        attachment_size_limit: 10 * 1024 * 1024,
      };
      if (guild) {
        Object.assign(payload, {
          guild_id: guild.id,
          guild_locale: "en-US",
          member: { ...memberPayload(guild, input.from.id), user: input.from, permissions: "0" },
          authorizing_integration_owners: { "0": guild.id },
          context: 0,
        });
      } else {
        Object.assign(payload, { user: input.from, authorizing_integration_owners: { "1": input.from.id }, context: 1 });
      }
      gateway.dispatch("INTERACTION_CREATE", payload);
      return { id, token: interactionToken };
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
