/**
 * Feishu's send limits: 5 messages a second to one chat (a topic thread counts in its chat), 50
 * calls a second and 1,000 a minute for an app, and a streaming card updated at most 10 times a
 * second. Feishu answers 230020 for the chat's limit and 429 with 99991400 (and
 * `x-ogw-ratelimit-reset`) for the app's. Feishu has no typing indicator and no drafts: only
 * sends and edits count.
 */
import { defineQuotas } from "../../src/gateway/kit/index.js";

export const feishuQuotas = defineQuotas({
  scopes: {
    chat: { per: "chat", limit: 5, windowMs: 1_000, calls: ["send", "edit"], note: "Feishu: 5 QPS per user or group chat." },
    app: { per: "account", limit: 50, windowMs: 1_000, calls: ["send", "edit"], note: "Feishu: 50 calls per second per app." },
    appMinute: { per: "account", limit: 1_000, windowMs: 60_000, calls: ["send", "edit"], note: "Feishu: 1,000 calls per minute per app." },
    card: { per: "message", limit: 10, windowMs: 1_000, calls: ["edit"], note: "Feishu: a streaming card takes at most 10 updates per second." },
  },
  // `oc_x:om_root` (a topic thread with a session of its own) sends to the chat `oc_x`.
  platformChatOf: (chatId) => chatId.split(":")[0]!,
});
