/**
 * Events as QQ dispatches them (op 0 over the gateway, or the body of a webhook callback), and the
 * Ed25519 signature QQ puts on a callback: the bot's key from its AppSecret as seed.
 */
import { createPrivateKey, randomBytes, sign } from "node:crypto";

export type QQEventType = "GROUP_AT_MESSAGE_CREATE" | "C2C_MESSAGE_CREATE" | "AT_MESSAGE_CREATE" | "MESSAGE_CREATE" | "DIRECT_MESSAGE_CREATE";

export interface QQEvent {
  /** The dispatch's event id (`<type>:<random>`). */
  id: string;
  t: QQEventType;
  d: Record<string, unknown> & { id: string };
}

export interface FakeQQUser {
  /** Openid in groups and C2C chats (QQ gives each bot its own). */
  openid: string;
  /** Guild user id. */
  guildId: string;
  username: string;
}

let next = 1;
const msgId = (prefix: string) => `${prefix}${String(next++).padStart(6, "0")}${randomBytes(6).toString("hex")}`;
const eventId = (type: QQEventType) => `${type}:${randomBytes(12).toString("hex")}`;
const now = () => new Date().toISOString();

/** A group message that @mentions the bot: QQ removed the bot's @ from the content, a space left before the text. */
export function groupAtMessage(input: { group: string; from: FakeQQUser; text: string }): QQEvent {
  const id = msgId("ROBOT1.0_group");
  return {
    id: eventId("GROUP_AT_MESSAGE_CREATE"),
    t: "GROUP_AT_MESSAGE_CREATE",
    d: { id, content: ` ${input.text}`, timestamp: now(), group_id: input.group, group_openid: input.group, author: { id: input.from.openid, member_openid: input.from.openid } },
  };
}

export function c2cMessage(input: { from: FakeQQUser; text: string }): QQEvent {
  const id = msgId("ROBOT1.0_c2c");
  return { id: eventId("C2C_MESSAGE_CREATE"), t: "C2C_MESSAGE_CREATE", d: { id, content: input.text, timestamp: now(), author: { id: input.from.openid, user_openid: input.from.openid } } };
}

/** A guild channel message; `atBot` puts the bot's `<@!id>` in front and in `mentions`, and makes it AT_MESSAGE_CREATE unless `all`. */
export function channelMessage(input: { channel: string; guild: string; from: FakeQQUser; text: string; bot: { id: string; username: string }; atBot?: boolean; all?: boolean }): QQEvent {
  const type: QQEventType = input.atBot && !input.all ? "AT_MESSAGE_CREATE" : "MESSAGE_CREATE";
  const author = { id: input.from.guildId, username: input.from.username, bot: false };
  return {
    id: eventId(type),
    t: type,
    d: {
      id: msgId("guildmsg"),
      channel_id: input.channel,
      guild_id: input.guild,
      content: input.atBot ? `<@!${input.bot.id}> ${input.text}` : input.text,
      timestamp: now(),
      author,
      member: { nick: input.from.username, roles: ["1"] },
      ...(input.atBot ? { mentions: [{ id: input.bot.id, username: input.bot.username, bot: true }] } : {}),
    },
  };
}

/** Ed25519 signature (hex) of `message` with the key QQ derives from `appSecret`. */
export function qqSign(appSecret: string, message: string): string {
  let seed = appSecret;
  while (Buffer.byteLength(seed) < 32) seed = seed.repeat(2);
  const key = createPrivateKey({ key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), Buffer.from(seed).subarray(0, 32)]), format: "der", type: "pkcs8" });
  return sign(null, Buffer.from(message), key).toString("hex");
}
