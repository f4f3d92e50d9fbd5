/**
 * The QQ plugin: `channels.qq` in the config, QQ_BOT_APP_ID / QQ_BOT_APP_SECRET / QQ_BOT_API_ROOT /
 * QQ_BOT_TOKEN_URL in the environment. The adapter is imported only when the channel is created
 * (see ChannelPlugin).
 */
import { createHash } from "node:crypto";
import { ConfigError } from "../../src/errors.js";
import { type AdmissionPolicy, defineChannel, withLimits } from "../../src/gateway/kit/index.js";
import { INBOUND_PREFIX } from "./chat-route.js";
import { type QQConfig, QQConfigSchema } from "./config.js";
import { qqQuotas } from "./quotas.js";

export type { QQConfig } from "./config.js";

function required(config: QQConfig, field: "appId" | "appSecret", variable: string): string {
  const value = config[field];
  if (!value) throw new ConfigError(`channels.qq is enabled but has no ${field}: set ${variable} or channels.qq.${field}`, `channels.qq.${field}`);
  return value;
}

/** Who may talk to the bot: users by openid or guild user id, and every member of the listed chats. */
export function qqPolicy(config: QQConfig): AdmissionPolicy {
  return { allowFrom: [...config.allowFrom, ...config.allowChats], groupPolicy: config.groupPolicy, groupContext: config.groupContext, rateLimit: { messages: config.rateLimitPerMinute, perMs: 60_000 } };
}

export const qqChannel = defineChannel({
  name: "qq",
  description: "QQ bot (Bot API v2): groups, one-to-one and guild channels over the WebSocket gateway or the signed webhook.",
  configSchema: QQConfigSchema,
  webhookPath: (config) => (config.mode === "webhook" ? config.webhook.path : undefined),
  environment: { QQ_BOT_APP_ID: "appId", QQ_BOT_APP_SECRET: "appSecret", QQ_BOT_API_ROOT: "apiRoot", QQ_BOT_TOKEN_URL: "tokenUrl" },
  policy: (config) => qqPolicy(config),
  async create(config, dependencies) {
    const appId = required(config, "appId", "QQ_BOT_APP_ID");
    const appSecret = required(config, "appSecret", "QQ_BOT_APP_SECRET");
    const { createQQAdapter } = await import("./qq-adapter.js");
    const adapter = createQQAdapter({
      appId,
      appSecret,
      apiRoot: config.apiRoot,
      tokenUrl: config.tokenUrl,
      mode: config.mode,
      intents: config.intents,
      markdown: config.markdown,
      activeMessages: config.activeMessages,
      webhookToleranceSeconds: config.webhook.toleranceSeconds,
      logger: dependencies.logger,
      ...(dependencies.now ? { now: dependencies.now } : {}),
    });
    return {
      adapter,
      policy: qqPolicy(config),
      quotas: withLimits(qqQuotas, config.limits, "channels.qq.limits"),
      teamProgress: config.teamProgress,
      ...(config.mode === "webhook" ? { webhook: { path: config.webhook.path, handle: adapter.webhook } } : {}),
      // The account is named by a hash of the AppID: one gateway holds the WebSocket session.
      account: createHash("sha256").update(appId).digest("hex").slice(0, 16),
      // The same message always makes the same inbound id, so its reply's ids repeat too.
      inboundIdOf: (event) => `${INBOUND_PREFIX}${event.platformMessageId}`,
      // Every part of a reply names the messages it answers (SendOptions.outbound): its msg_id.
      annotateSends: true,
    };
  },
});
