/**
 * What Slack sends an app, as the fake builds it: Events API callbacks (`event_callback` with a
 * `message` or `app_mention` event), slash command payloads, and the `v0` signature Slack puts on
 * every HTTP request (`X-Slack-Signature`, `X-Slack-Request-Timestamp`).
 */
import { createHmac, randomBytes } from "node:crypto";

export interface FakeSlackUser {
  id: string;
  name: string;
  displayName?: string;
}

export interface FakeFile {
  id: string;
  name: string;
  mimetype: string;
  size: number;
  url_private: string;
  url_private_download: string;
  mode?: string;
  [field: string]: unknown;
}

export interface MessageInput {
  from: FakeSlackUser;
  /** The conversation: a DM (`D…`), a channel (`C…`), a private channel or group DM (`G…`). */
  channel: string;
  text: string;
  /** A reply in the thread of this message. */
  threadTs?: string;
  /** Who started that thread (Slack's `parent_user_id`). */
  parentUserId?: string;
  /** Mention the bot: `<@BOT>` leads the text, and an `app_mention` event comes as well. */
  mention?: boolean;
  files?: FakeFile[];
  subtype?: string;
  botId?: string;
}

export interface EventCallbackJson {
  type: "event_callback";
  token: string;
  team_id: string;
  api_app_id: string;
  event_id: string;
  event_time: number;
  event: Record<string, unknown> & { type: string; ts: string; channel: string };
  authorizations: unknown[];
  is_ext_shared_channel: boolean;
  event_context: string;
}

export interface SlackContext {
  teamId: string;
  appId: string;
  botUserId: string;
}

let sequence = 0;

/** A fresh message ts, `seconds.micro`, unique within the process. */
export function nextTs(): string {
  sequence += 1;
  return `${Math.floor(Date.now() / 1000)}.${String(sequence).padStart(6, "0")}`;
}

const eventId = () => `Ev${randomBytes(6).toString("hex").toUpperCase()}`;

export function channelTypeOf(channel: string): string {
  if (channel.startsWith("D")) return "im";
  if (channel.startsWith("G")) return "group";
  return "channel";
}

function callback(event: EventCallbackJson["event"], context: SlackContext): EventCallbackJson {
  return {
    type: "event_callback",
    token: "verification-token-unused",
    team_id: context.teamId,
    api_app_id: context.appId,
    event_id: eventId(),
    event_time: Math.floor(Date.now() / 1000),
    event,
    authorizations: [{ team_id: context.teamId, user_id: context.botUserId, is_bot: true }],
    is_ext_shared_channel: false,
    event_context: randomBytes(8).toString("hex"),
  };
}

/** The callbacks Slack sends for one message: `message`, and `app_mention` too when the bot is mentioned in a channel. */
export function messageCallbacks(input: MessageInput, context: SlackContext): { ts: string; callbacks: EventCallbackJson[] } {
  const ts = nextTs();
  const text = input.mention ? `<@${context.botUserId}> ${input.text}` : input.text;
  const common = {
    user: input.from.id,
    text,
    ts,
    team: context.teamId,
    channel: input.channel,
    client_msg_id: randomBytes(16).toString("hex"),
    blocks: [],
    ...(input.threadTs ? { thread_ts: input.threadTs, parent_user_id: input.parentUserId ?? input.from.id } : {}),
    ...(input.files ? { files: input.files, upload: false } : {}),
    ...(input.subtype ? { subtype: input.subtype } : input.files ? { subtype: "file_share" } : {}),
    ...(input.botId ? { bot_id: input.botId } : {}),
  };
  const callbacks = [callback({ type: "message", channel_type: channelTypeOf(input.channel), event_ts: ts, ...common }, context)];
  if (input.mention && !input.channel.startsWith("D")) callbacks.push(callback({ type: "app_mention", event_ts: ts, ...common }, context));
  return { ts, callbacks };
}

/** A slash command's payload (the form fields; Socket Mode carries them as JSON). */
export function slashCommand(input: { from: FakeSlackUser; channel: string; command: string; text?: string }, context: SlackContext): Record<string, string> {
  return {
    token: "verification-token-unused",
    team_id: context.teamId,
    team_domain: "fake",
    channel_id: input.channel,
    channel_name: input.channel.startsWith("D") ? "directmessage" : "general",
    user_id: input.from.id,
    user_name: input.from.name,
    command: input.command,
    text: input.text ?? "",
    api_app_id: context.appId,
    is_enterprise_install: "false",
    response_url: "http://127.0.0.1:9/commands/unused",
    trigger_id: `${Date.now()}.${randomBytes(6).toString("hex")}`,
  };
}

/** Slack's signature of an HTTP request. */
export function signRequest(body: string, secret: string, timestamp = String(Math.floor(Date.now() / 1000))): Record<string, string> {
  const signature = `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  return { "x-slack-request-timestamp": timestamp, "x-slack-signature": signature };
}
