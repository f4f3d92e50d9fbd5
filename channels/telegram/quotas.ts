/**
 * Telegram's send limits, as its Bot FAQ publishes them: about one message a second in a chat,
 * at most 20 messages a minute in a group (edits included), about 30 messages a second in all.
 * Telegram answers a call over them with 429 and `retry_after`, without saying which budget it hit.
 */
import { defineQuotas } from "../../src/gateway/kit/index.js";

export const telegramQuotas = defineQuotas({
  scopes: {
    chat: { per: "chat", limit: 1, windowMs: 1_000, calls: ["send", "edit", "draft"], note: "Telegram: avoid more than one message per second in a chat." },
    group: { per: "group", limit: 20, windowMs: 60_000, calls: ["send", "edit"], note: "Telegram: no more than 20 messages per minute in a group, edits included." },
    bot: { per: "account", limit: 30, windowMs: 1_000, note: "Telegram: about 30 messages per second for a bot." },
  },
});
