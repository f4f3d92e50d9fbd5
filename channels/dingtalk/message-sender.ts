/**
 * Replies as DingTalk robot messages: Markdown (`sampleMarkdown`, titled with its first words) or,
 * for the plain fallback, `sampleText`, through the OpenAPI into a one-to-one chat
 * (`oToMessages/batchSend`) or a group (`groupMessages/send`); the message's id is DingTalk's
 * `processQueryKey`. A chat whose sender has no staffId (`dm:` chats) is answered through the
 * session webhook of its last message while that is valid. DingTalk takes no idempotency key for
 * messages: the bus's delivery dedupe keeps a re-run reply single.
 */
import { createHash } from "node:crypto";
import { ChannelError } from "../../src/errors.js";
import type { SendOptions } from "../../src/gateway/kit/index.js";
import { type ChatRoute, chatIdOf, routeOf } from "./chat-route.js";
import type { DingTalkApi } from "./open-api.js";
import { titleOf } from "./render-markdown.js";
import type { RobotMessage } from "./robot-message.js";

export interface MessageSender {
  /** Keeps the session webhook of a message from a chat that has no other way back. */
  remember(message: RobotMessage): void;
  /** Sends one message; resolves with its platform message id. */
  post(chatId: string, text: string, options: SendOptions): Promise<string>;
}

interface Sent {
  processQueryKey?: string;
  invalidStaffIdList?: string[];
  flowControlledStaffIdList?: string[];
}

const MAX_SESSION_WEBHOOKS = 10_000;

export function createMessageSender(options: { api: DingTalkApi; robotCode: string; robotName?: string; now: () => number }): MessageSender {
  const { api, robotCode, now } = options;
  const sessionWebhooks = new Map<string, { url: string; expiresAt: number }>();

  async function sendBySession(chatId: string, text: string, sendOptions: SendOptions): Promise<string> {
    const session = sessionWebhooks.get(chatId);
    if (!session || session.expiresAt <= now()) {
      throw new ChannelError("dingtalk: this chat's session webhook expired, and its sender has no user id to write to", "dingtalk", { kind: "not-found" });
    }
    const body =
      sendOptions.format === "plain" ? { msgtype: "text", text: { content: text } } : { msgtype: "markdown", markdown: { title: titleOf(text, options.robotName), text } };
    await api.postWebhook("sessionWebhook", session.url, body);
    // The session webhook names no message: an id of our own, stable for the same send.
    return `session:${createHash("sha256").update(sendOptions.idempotencyKey ?? `${chatId}:${now()}:${text}`).digest("hex").slice(0, 24)}`;
  }

  async function sendByApi(route: Exclude<ChatRoute, { kind: "session" }>, text: string, format: SendOptions["format"]): Promise<string> {
    const body =
      format === "plain"
        ? { msgKey: "sampleText", msgParam: JSON.stringify({ content: text }) }
        : { msgKey: "sampleMarkdown", msgParam: JSON.stringify({ title: titleOf(text, options.robotName), text }) };
    if (route.kind === "group") {
      const sent = await api.call<Sent>("groupMessages.send", "POST", "/v1.0/robot/groupMessages/send", { robotCode, openConversationId: route.conversationId, ...body });
      if (!sent.processQueryKey) throw new ChannelError("dingtalk send answered without a processQueryKey", "dingtalk");
      return sent.processQueryKey;
    }
    const sent = await api.call<Sent>("oToMessages.batchSend", "POST", "/v1.0/robot/oToMessages/batchSend", { robotCode, userIds: [route.staffId], ...body });
    if (sent.invalidStaffIdList?.includes(route.staffId)) {
      throw new ChannelError("dingtalk oToMessages.batchSend: the user is not reachable by this robot", "dingtalk", { kind: "not-found" });
    }
    if (sent.flowControlledStaffIdList?.includes(route.staffId)) {
      throw new ChannelError("dingtalk oToMessages.batchSend: the user's messages are flow-controlled", "dingtalk", { kind: "rate-limit", retryAfterMs: 1_000 });
    }
    if (!sent.processQueryKey) throw new ChannelError("dingtalk send answered without a processQueryKey", "dingtalk");
    return sent.processQueryKey;
  }

  return {
    remember(message) {
      if (!message.sessionWebhook || !message.sessionWebhookExpiredTime) return;
      const chatId = chatIdOf(message);
      if (routeOf(chatId).kind !== "session") return;
      sessionWebhooks.delete(chatId);
      sessionWebhooks.set(chatId, { url: message.sessionWebhook, expiresAt: message.sessionWebhookExpiredTime });
      if (sessionWebhooks.size > MAX_SESSION_WEBHOOKS) sessionWebhooks.delete(sessionWebhooks.keys().next().value!);
    },
    post(chatId, text, sendOptions) {
      const route = routeOf(chatId);
      return route.kind === "session" ? sendBySession(chatId, text, sendOptions) : sendByApi(route, text, sendOptions.format);
    },
  };
}
