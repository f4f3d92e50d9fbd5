/**
 * Replies as QQ messages: plain text (msg_type 0) or, with `markdown` on and a formatted text,
 * native Markdown (msg_type 2), into the chat its id names (chat-route.ts).
 *
 * Every send is a passive reply while the reply window allows (reply-window.ts): it carries the
 * triggering `msg_id` and, in groups and C2C chats, the next `msg_seq`. When QQ says a `msg_seq`
 * was used already (40054005), another gateway used it before a failover: the next seq is tried (a
 * key this process sent before is not sent again: its message's id is returned). Outside the
 * window, or when QQ refuses the reply as too late or too many, the message goes out as an active
 * message where `activeMessages` allows it for the chat's kind, and is refused (`forbidden`, with
 * the reason) otherwise: the dispatcher reports and drops it.
 */
import { ChannelError } from "../../src/errors.js";
import type { SendOptions } from "../../src/gateway/kit/index.js";
import { type ChatRoute, INBOUND_PREFIX, isV2, messagesPath, routeOf } from "./chat-route.js";
import type { QQApi } from "./open-api.js";
import { DUPLICATE_SEQ_CODE, QQApiFailure, isWindowClosed } from "./qq-errors.js";
import { REPLIES_PER_MESSAGE } from "./quotas.js";
import type { Passive, ReplyWindow } from "./reply-window.js";

export interface MessageSenderOptions {
  api: QQApi;
  window: ReplyWindow;
  markdown: boolean;
  activeMessages: { groups: boolean; channels: boolean };
}

export interface MessageSender {
  /** Sends one message; resolves with its platform message id. */
  post(chatId: string, text: string, options: SendOptions): Promise<string>;
}

/**
 * The user message a send answers: the one it replies to, or else the one the reply's turn answers
 * (SendOptions.outbound, on every part of a reply: a later part, or a part another gateway sends
 * after a failover, finds its `msg_id` there).
 */
function triggerOf(sendOptions: SendOptions): string | undefined {
  if (sendOptions.replyTo) return sendOptions.replyTo;
  const answered = sendOptions.outbound?.answers.at(-1);
  return answered?.startsWith(INBOUND_PREFIX) ? answered.slice(INBOUND_PREFIX.length) : undefined;
}

const failureIn = (error: unknown): QQApiFailure | undefined => (error instanceof ChannelError && error.cause instanceof QQApiFailure ? error.cause : undefined);

function bodyOf(route: ChatRoute, text: string, markdown: boolean, passive: Passive | undefined): Record<string, unknown> {
  const reply = passive ? { msg_id: passive.msgId, ...(passive.seq === undefined ? {} : { msg_seq: passive.seq }) } : {};
  if (isV2(route)) return markdown ? { msg_type: 2, markdown: { content: text }, ...reply } : { msg_type: 0, content: text, ...reply };
  return markdown ? { markdown: { content: text }, ...reply } : { content: text, ...reply };
}

export function createMessageSender(options: MessageSenderOptions): MessageSender {
  const { api, window } = options;

  async function call(route: ChatRoute, text: string, markdown: boolean, passive: Passive | undefined): Promise<string> {
    const sent = await api.call<{ id?: unknown }>(passive ? "reply" : "active message", "POST", messagesPath(route), bodyOf(route, text, markdown, passive));
    if (typeof sent.id !== "string" || sent.id === "") throw new ChannelError("qq answered a message without its id", "qq");
    return sent.id;
  }

  async function passiveSend(chatId: string, route: ChatRoute, text: string, markdown: boolean, sendOptions: SendOptions): Promise<string | undefined> {
    const key = sendOptions.idempotencyKey;
    const counted = isV2(route);
    const replyTo = triggerOf(sendOptions);
    for (let attempt = 0; attempt < REPLIES_PER_MESSAGE; attempt++) {
      const passive = window.passiveFor(chatId, { counted, ...(replyTo ? { replyTo } : {}), ...(key ? { key } : {}) });
      if (!passive) return undefined;
      if (passive.sentAs) return passive.sentAs;
      try {
        const id = await call(route, text, markdown, passive);
        window.spent(passive, { ...(key ? { key } : {}), id });
        return id;
      } catch (error) {
        const failure = failureIn(error);
        if (failure?.code === DUPLICATE_SEQ_CODE) {
          // Used before this process knew of it (another gateway, before a failover): the next one.
          window.spent(passive);
          continue;
        }
        if (failure && isWindowClosed(failure)) {
          window.close(passive.msgId);
          return undefined;
        }
        throw error;
      }
    }
    return undefined;
  }

  return {
    async post(chatId, text, sendOptions) {
      const route = routeOf(chatId);
      if (!route) throw new ChannelError(`qq: ${chatId} is not a QQ chat id (group:, user:, channel: or dms:)`, "qq", { kind: "not-found" });
      const markdown = options.markdown && sendOptions.format === "formatted";
      const passive = await passiveSend(chatId, route, text, markdown, sendOptions);
      if (passive !== undefined) return passive;
      const allowed = isV2(route) ? options.activeMessages.groups : options.activeMessages.channels;
      if (!allowed) {
        const setting = isV2(route) ? "channels.qq.activeMessages.groups" : "channels.qq.activeMessages.channels";
        throw new ChannelError(
          `qq: ${chatId} is outside QQ's reply window (a reply within 5 minutes of a user's message, ${REPLIES_PER_MESSAGE} per message in groups and C2C chats) and active messages are off (${setting}); the message was not sent`,
          "qq",
          { kind: "forbidden" },
        );
      }
      return call(route, text, markdown, undefined);
    },
  };
}
