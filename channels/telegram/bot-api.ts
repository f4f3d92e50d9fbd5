/**
 * The Bot API calls the Telegram adapter makes, through telegraf's client: every call's failure
 * comes out as a ChannelError without the token, and `callRaw` reaches the methods telegraf 4.16
 * does not know (sendMessageDraft) and getUpdates with an abort signal. Sends reply without
 * failing when the original is gone; an edit Telegram calls "not modified" is no failure.
 */
import type { Telegraf } from "telegraf";
import type { Logger } from "pino";
import type { Scrub, SendOptions } from "../../src/gateway/kit/index.js";
import { ChannelError } from "../../src/errors.js";
import { isNotModified, toChannelError } from "./telegram-errors.js";

/** Telegram chat ids are numbers; keep `@channelname` ids as they are. */
function chatIdOf(chatId: string): number | string {
  return /^-?\d+$/.test(chatId) ? Number(chatId) : chatId;
}

function messageIdOf(platformMessageId: string): number {
  const id = Number(platformMessageId);
  if (!Number.isSafeInteger(id)) throw new ChannelError(`not a Telegram message id: ${platformMessageId}`, "telegram", { kind: "not-found" });
  return id;
}

export class TelegramBotApi {
  constructor(
    readonly telegram: Telegraf["telegram"],
    private readonly scrub: Scrub,
    private readonly logger: Logger,
  ) {}

  /** Runs one API call; anything it throws comes out as a ChannelError without the token. */
  async guard<T>(method: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw toChannelError(error, method, this.scrub);
    }
  }

  /** For methods telegraf 4.16 does not know, and for getUpdates with an abort signal. */
  callRaw<T>(method: string, payload: Record<string, unknown>, signal?: AbortSignal): Promise<T> {
    const callApi = this.telegram.callApi.bind(this.telegram) as unknown as (method: string, payload: object, extra: { signal?: AbortSignal }) => Promise<T>;
    return this.guard(method, () => callApi(method, payload, signal ? { signal } : {}));
  }

  async send(chatId: string, text: string, sendOptions: SendOptions): Promise<{ platformMessageId: string }> {
    const message = await this.guard("sendMessage", () =>
      this.telegram.sendMessage(chatIdOf(chatId), text, {
        parse_mode: sendOptions.format === "formatted" ? "HTML" : undefined,
        reply_parameters: sendOptions.replyTo ? { message_id: messageIdOf(sendOptions.replyTo), allow_sending_without_reply: true } : undefined,
      }),
    );
    return { platformMessageId: String(message.message_id) };
  }

  async edit(chatId: string, platformMessageId: string, text: string, sendOptions: SendOptions): Promise<void> {
    const messageId = messageIdOf(platformMessageId);
    try {
      await this.telegram.editMessageText(chatIdOf(chatId), messageId, undefined, text, {
        parse_mode: sendOptions.format === "formatted" ? "HTML" : undefined,
      });
    } catch (error) {
      if (isNotModified(error)) return;
      throw toChannelError(error, "editMessageText", this.scrub);
    }
  }

  async draft(chatId: string, draftId: number, text: string): Promise<void> {
    await this.callRaw("sendMessageDraft", { chat_id: chatIdOf(chatId), draft_id: draftId, text });
  }

  async typing(chatId: string): Promise<void> {
    try {
      await this.telegram.sendChatAction(chatIdOf(chatId), "typing");
    } catch (error) {
      // Best effort: a missing "typing…" is not worth failing a reply over.
      this.logger.debug({ channel: "telegram", chatId, error: toChannelError(error, "sendChatAction", this.scrub).message }, "telegram typing failed");
    }
  }
}
