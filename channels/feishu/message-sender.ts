/**
 * Feishu's outbound side: an interactive card with the Markdown, sent as a reply to the message it
 * answers (`reply_in_thread` inside topic threads) or created in the chat; streaming updates that
 * card (PATCH). Every send carries a `uuid` derived from the dispatcher's idempotency key, so a
 * retried or re-run send shows once. A text over the card limits is split over several cards; a
 * card Feishu refuses falls back to a post (Markdown), then to plain text.
 */
import { createHash } from "node:crypto";
import type * as lark from "@larksuiteoapi/node-sdk";
import type { Logger } from "pino";
import type { ExpiringSet, SendOptions } from "../../src/gateway/kit/index.js";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { type MessageBody, fitCards, markdownCard, markdownPost, plainText } from "./cards.js";
import { splitChatId } from "./inbound-event.js";

/** Feishu's uuid (at most 50 characters) for a send: a UUID-shaped hash of the idempotency key and the part. */
export function uuidOf(idempotencyKey: string, part: number): string {
  const hex = createHash("sha256").update(`${idempotencyKey}/${part}`).digest("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/**
 * A streamed draft shows only its first card; a final (or a gateway reply) is split over as many
 * as it needs. The dispatcher keys the message a draft starts `<reply id>#draft`, and edits of it
 * carry no `outbound` (finals do: the plugin asks for annotated sends).
 */
export function isDraft(sendOptions: SendOptions, editing: boolean): boolean {
  return editing ? sendOptions.outbound === undefined : (sendOptions.idempotencyKey?.endsWith("#draft") ?? false);
}

/** Runs one SDK call; both of the SDK's failure shapes come back as a ChannelError naming the method. */
export type FeishuCall = <T>(method: string, run: () => Promise<T>) => Promise<T>;

export class FeishuSender {
  constructor(
    private readonly client: lark.Client,
    private readonly call: FeishuCall,
    private readonly logger: Logger,
    /** Every message sent is added: a reply to it is a reply to the bot. */
    private readonly sentByBot: ExpiringSet,
    /** User messages that were in a thread: the reply goes into the thread. */
    private readonly inThread: ExpiringSet,
  ) {}

  /** Sends a text as one card or several; a draft shows only its first, with an ellipsis. */
  async send(chatId: string, text: string, sendOptions: SendOptions): Promise<{ platformMessageId: string }> {
    const parts = fitCards(text);
    const shown = isDraft(sendOptions, false) ? parts.slice(0, 1) : parts;
    const key = sendOptions.idempotencyKey;
    const first = await this.sendPart(chatId, shown.length < parts.length ? `${shown[0]}\n…` : shown[0]!, sendOptions, key ? uuidOf(key, 0) : undefined);
    for (let index = 1; index < shown.length; index++) {
      // Like the dispatcher's later chunks: into the chat (or the thread), not another reply.
      await this.sendPart(chatId, shown[index]!, { ...sendOptions, replyTo: undefined }, key ? uuidOf(key, index) : undefined);
    }
    return { platformMessageId: first };
  }

  /** Updates the card; a final that outgrew it continues as more cards in the chat (or the thread). */
  async edit(chatId: string, platformMessageId: string, text: string, sendOptions: SendOptions): Promise<void> {
    const parts = fitCards(text);
    const draft = isDraft(sendOptions, true);
    const head = draft && parts.length > 1 ? `${parts[0]}\n…` : parts[0]!;
    await this.call("message.patch", () => this.client.im.v1.message.patch({ path: { message_id: platformMessageId }, data: { content: markdownCard(head).content } }));
    if (draft) return;
    const key = sendOptions.idempotencyKey ?? `edit:${platformMessageId}`;
    for (let index = 1; index < parts.length; index++) {
      await this.sendPart(chatId, parts[index]!, { ...sendOptions, replyTo: undefined }, uuidOf(key, index));
    }
  }

  /** A card; when Feishu refuses the card itself, the same text as a post, then as plain text. */
  private async sendPart(chatId: string, text: string, sendOptions: SendOptions, uuid: string | undefined): Promise<string> {
    const bodies = [markdownCard(text), markdownPost(text), plainText(text)];
    for (let index = 0; ; index++) {
      try {
        // Each fallback is a different message: it gets its own uuid.
        return await this.post(chatId, bodies[index]!, sendOptions, uuid && index > 0 ? uuidOf(uuid, index) : uuid);
      } catch (error) {
        const kind = error instanceof ChannelError ? error.kind : "other";
        if (index === bodies.length - 1 || (kind !== "formatting" && kind !== "too-long")) throw error;
        this.logger.warn({ channel: "feishu", chatId, error: errorMessage(error), fallback: bodies[index + 1]!.msgType }, "feishu refused the message; sending it another way");
      }
    }
  }

  /** Sends one message: a reply to `replyTo` when given, otherwise into the chat (or the thread). */
  private async post(chatId: string, body: MessageBody, sendOptions: SendOptions, uuid: string | undefined): Promise<string> {
    const { client, call } = this;
    const target = splitChatId(chatId);
    const replyTo = sendOptions.replyTo ?? target.threadRoot;
    const data = { msg_type: body.msgType, content: body.content, ...(uuid ? { uuid } : {}) };
    const answer = replyTo
      ? await call("message.reply", () =>
          client.im.v1.message.reply({ path: { message_id: replyTo }, data: { ...data, reply_in_thread: target.threadRoot !== undefined || this.inThread.has(replyTo) } }),
        )
      : await call("message.create", () => client.im.v1.message.create({ params: { receive_id_type: "chat_id" }, data: { ...data, receive_id: target.chatId } }));
    const messageId = answer.data?.message_id;
    if (!messageId) throw new ChannelError("feishu send answered without a message_id", "feishu");
    this.sentByBot.add(messageId);
    return messageId;
  }
}
