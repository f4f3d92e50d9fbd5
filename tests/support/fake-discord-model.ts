/**
 * The data model of the fake Discord (fake-discord-server.ts): the API objects it serves, what it
 * records, and the REST routes it knows.
 */
import type { IncomingMessage } from "node:http";

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
  /** Voice messages: the recording's length in seconds and its waveform (base64). */
  duration_secs?: number;
  waveform?: string;
}

/** Message flag IS_VOICE_MESSAGE: the message is a voice message, its one attachment the recording. */
export const IS_VOICE_MESSAGE = 1 << 13;

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
  /** The slash command this message answers (an interaction response). */
  command?: string;
}

export type RouteName =
  | "getGateway"
  | "getMe"
  | "getChannel"
  | "createMessage"
  | "editMessage"
  | "typing"
  | "putCommands"
  | "interactionCallback"
  | "deleteResponse"
  | "other";

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
  /** Invalid Form Body's field errors (`{ content: { _errors: [{ code, message }] } }`). */
  errors?: unknown;
}

export interface FakeDiscordOptions {
  token: string;
  bot?: { id?: string; username?: string };
  heartbeatIntervalMs?: number;
  /** False: the app was not granted the privileged Message Content intent (the gateway closes with 4014). Default true. */
  privilegedIntents?: boolean;
  /**
   * Rate limits to enforce with Discord's real 429 (Retry-After, X-RateLimit-* with the scope, a
   * body with retry_after): `channel` for messages created and edited in one channel, `bot` for
   * every call of the bot. Default: none.
   */
  limits?: { channel?: { limit: number; windowMs: number }; bot?: { limit: number; windowMs: number } };
}

/** Discord's published limits: 5 messages per 5 s in a channel, 50 requests a second for a bot. */
export const DISCORD_PUBLISHED_LIMITS = { channel: { limit: 5, windowMs: 5_000 }, bot: { limit: 50, windowMs: 1_000 } };

let snowflakeCounter = 0;
/** Snowflakes as Discord makes them: milliseconds since 2015 in the high bits, a counter below. */
export function snowflake(): string {
  snowflakeCounter = (snowflakeCounter + 1) % 4096;
  return String(((BigInt(Date.now()) - 1_420_070_400_000n) << 22n) | BigInt(snowflakeCounter));
}

export function readBody(incoming: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => resolve(Buffer.concat(chunks)));
    incoming.on("error", reject);
  });
}

export function routeOf(method: string, path: string): { route: RouteName; params: string[] } {
  const table: Array<[string, RegExp, RouteName]> = [
    ["GET", /^\/gateway(?:\/bot)?$/, "getGateway"],
    ["GET", /^\/users\/@me$/, "getMe"],
    ["GET", /^\/channels\/(\d+)$/, "getChannel"],
    ["POST", /^\/channels\/(\d+)\/messages$/, "createMessage"],
    ["PATCH", /^\/channels\/(\d+)\/messages\/(\d+)$/, "editMessage"],
    ["POST", /^\/channels\/(\d+)\/typing$/, "typing"],
    ["PUT", /^\/applications\/(\d+)\/commands$/, "putCommands"],
    ["POST", /^\/interactions\/(\d+)\/([^/]+)\/callback$/, "interactionCallback"],
    ["DELETE", /^\/webhooks\/(\d+)\/([^/]+)\/messages\/([^/]+)$/, "deleteResponse"],
  ];
  for (const [verb, pattern, route] of table) {
    const match = method === verb ? pattern.exec(path) : null;
    if (match) return { route, params: match.slice(1).map((param) => decodeURIComponent(param)) };
  }
  return { route: "other", params: [] };
}
