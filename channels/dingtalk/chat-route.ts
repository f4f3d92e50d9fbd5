/**
 * A DingTalk chat id says where its replies go, so that a reply finds its chat with nothing but the
 * id (a background job's result, another gateway after a failover):
 *
 * - a group: its openConversationId as it is (`cid…`): groupMessages/send, cards into IM_GROUP;
 * - a one-to-one chat: `user:<staffId>`: oToMessages/batchSend, cards into IM_ROBOT;
 * - a one-to-one chat whose sender has no staffId (not a member of the app's organization):
 *   `dm:<conversationId>`, answered through the message's session webhook while it is valid.
 */
import type { RobotMessage } from "./robot-message.js";

export type ChatRoute = { kind: "group"; conversationId: string } | { kind: "user"; staffId: string } | { kind: "session"; conversationId: string };

const USER = "user:";
const SESSION = "dm:";

export function chatIdOf(message: Pick<RobotMessage, "conversationType" | "conversationId" | "senderStaffId">): string {
  if (message.conversationType === "2") return message.conversationId;
  return message.senderStaffId ? `${USER}${message.senderStaffId}` : `${SESSION}${message.conversationId}`;
}

export function routeOf(chatId: string): ChatRoute {
  if (chatId.startsWith(USER)) return { kind: "user", staffId: chatId.slice(USER.length) };
  if (chatId.startsWith(SESSION)) return { kind: "session", conversationId: chatId.slice(SESSION.length) };
  return { kind: "group", conversationId: chatId };
}
