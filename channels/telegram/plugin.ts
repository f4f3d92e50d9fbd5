/**
 * Telegram as a channel plugin: the Bot API adapter, its admission policy and its webhook. The
 * adapter, and telegraf with it, is imported only when the channel is created (see ChannelPlugin).
 */
import { createHash } from "node:crypto";
import path from "node:path";
import { ConfigError } from "../../src/errors.js";
import { type AdmissionPolicy, defineChannel, withLimits } from "../../src/gateway/kit/index.js";
import { type TelegramConfig, TelegramConfigSchema } from "./config.js";
import { telegramQuotas } from "./quotas.js";

export const telegramChannel = defineChannel({
  name: "telegram",
  description: "Telegram bot (long polling or webhook).",
  configSchema: TelegramConfigSchema,
  webhookPath: (config) => (config.mode === "webhook" ? config.webhook?.path : undefined),
  environment: { TELEGRAM_BOT_TOKEN: "token", TELEGRAM_API_ROOT: "apiRoot" },
  policy: (config) => telegramPolicy(config),
  async create(config, { logger, dataDir }) {
    if (!config.token) throw new ConfigError("channels.telegram is enabled but has no token: set TELEGRAM_BOT_TOKEN or channels.telegram.token", "channels.telegram.token");
    const { createTelegramAdapter } = await import("./telegram-adapter.js");
    const webhook = config.mode === "webhook" && config.webhook?.url && config.webhook.secret ? { url: config.webhook.url, secret: config.webhook.secret, path: config.webhook.path } : undefined;
    const adapter = createTelegramAdapter({
      token: config.token,
      apiRoot: config.apiRoot,
      mode: config.mode,
      webhook,
      maxFileBytes: config.maxFileBytes,
      downloadDir: path.join(dataDir, "media", "telegram"),
      logger,
    });
    return {
      adapter,
      policy: telegramPolicy(config),
      quotas: withLimits(telegramQuotas, config.limits, "channels.telegram.limits"),
      teamProgress: config.teamProgress,
      // The account is named by a hash of the token: the token itself must not become a key.
      account: createHash("sha256").update(config.token).digest("hex").slice(0, 16),
      webhook: webhook && { path: webhook.path, handle: ({ headers, rawBody }) => adapter.handleWebhook(headers, rawBody).then(({ status, error }) => ({ status, body: error ? { error } : { ok: true } })) },
    };
  },
});

function telegramPolicy(config: TelegramConfig): AdmissionPolicy {
  return { allowFrom: config.allowFrom, groupPolicy: config.groupPolicy, groupContext: config.groupContext, rateLimit: { messages: config.rateLimitPerMinute, perMs: 60_000 } };
}
