/**
 * Robot messages as DingTalk delivers them (the Stream topic `/v1.0/im/bot/messages/get` and the
 * HTTP callback carry the same JSON), and the signature DingTalk puts on an HTTP callback.
 */
import { createHmac, randomBytes } from "node:crypto";

export interface FakeUser {
  /** The organization's user id; absent for someone outside the app's organization. */
  staffId?: string;
  /** DingTalk's id of the user for this app (`$:LWCP_v1:$…`). */
  dingtalkId: string;
  nick: string;
}

export interface FakeMessageInput {
  /** "1": one-to-one, "2": group. Default "1". */
  conversationType?: "1" | "2";
  /** Default: the sender's one-to-one conversation, or `cidGroup`. */
  conversationId?: string;
  conversationTitle?: string;
  sender: FakeUser;
  text?: string;
  /** The robot was @mentioned: isInAtList and atUsers say so (DingTalk removed the @ from the text). */
  atRobot?: boolean;
  /** Other users @mentioned. */
  atUsers?: FakeUser[];
  msgtype?: string;
  content?: unknown;
  /** ms since epoch. Default now. */
  createAt?: number;
}

export interface RobotMessageJson {
  msgId: string;
  msgtype: string;
  conversationId: string;
  conversationType: "1" | "2";
  senderId: string;
  senderNick: string;
  chatbotUserId: string;
  robotCode: string;
  sessionWebhook: string;
  sessionWebhookExpiredTime: number;
  createAt: number;
  [field: string]: unknown;
}

export interface MessageContext {
  robotCode: string;
  chatbotUserId: string;
  corpId: string;
  /** Mints the session webhook URL of a conversation. */
  sessionWebhook(conversationId: string): { url: string; expiresAt: number };
}

let nextMessage = 1;

export function conversationOf(user: FakeUser): string {
  return `cidp2p${Buffer.from(user.dingtalkId).toString("hex").slice(-16)}`;
}

export function buildRobotMessage(input: FakeMessageInput, context: MessageContext): RobotMessageJson {
  const conversationType = input.conversationType ?? "1";
  const conversationId = input.conversationId ?? (conversationType === "1" ? conversationOf(input.sender) : "cidGroup");
  const session = context.sessionWebhook(conversationId);
  const msgtype = input.msgtype ?? "text";
  const atUsers = [...(input.atRobot ? [{ dingtalkId: context.chatbotUserId }] : []), ...(input.atUsers ?? []).map((user) => ({ dingtalkId: user.dingtalkId, ...(user.staffId ? { staffId: user.staffId } : {}) }))];
  return {
    msgId: `msg${String(nextMessage++).padStart(6, "0")}${randomBytes(6).toString("hex")}`,
    msgtype,
    conversationId,
    conversationType,
    ...(conversationType === "2" ? { conversationTitle: input.conversationTitle ?? "Team room" } : {}),
    senderId: input.sender.dingtalkId,
    ...(input.sender.staffId ? { senderStaffId: input.sender.staffId } : {}),
    senderNick: input.sender.nick,
    senderCorpId: context.corpId,
    chatbotCorpId: context.corpId,
    chatbotUserId: context.chatbotUserId,
    robotCode: context.robotCode,
    isAdmin: false,
    ...(conversationType === "2" ? { isInAtList: input.atRobot === true } : {}),
    ...(atUsers.length > 0 ? { atUsers } : {}),
    sessionWebhook: session.url,
    sessionWebhookExpiredTime: session.expiresAt,
    createAt: input.createAt ?? Date.now(),
    ...(msgtype === "text" ? { text: { content: input.text ?? "" } } : {}),
    ...(input.content === undefined ? {} : { content: input.content }),
  };
}

/** DingTalk's signature of an HTTP callback: Base64 HMAC-SHA256 of `timestamp\nsecret`, keyed with the secret. */
export function signCallback(timestamp: string, appSecret: string): string {
  return createHmac("sha256", appSecret).update(`${timestamp}\n${appSecret}`).digest("base64");
}
