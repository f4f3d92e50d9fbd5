/**
 * The Feishu / Lark plugin: `channels.feishu` in the config, FEISHU_APP_ID / FEISHU_APP_SECRET /
 * FEISHU_DOMAIN in the environment. The adapter, and the Lark SDK with it, is imported only when
 * the channel is created (see ChannelPlugin).
 */
import { createHash } from "node:crypto";
import path from "node:path";
import { ConfigError } from "../../src/errors.js";
import { type AdmissionPolicy, defineChannel, withLimits } from "../../src/gateway/kit/index.js";
import { APP_ID_PATTERN, type FeishuConfig, FeishuConfigSchema, domainUrl } from "./config.js";
import { feishuQuotas } from "./quotas.js";

export type { FeishuConfig } from "./config.js";

function required(config: FeishuConfig, field: "appId" | "appSecret", variable: string): string {
  const value = config[field];
  if (!value) throw new ConfigError(`channels.feishu is enabled but has no ${field}: set ${variable} or channels.feishu.${field}`, `channels.feishu.${field}`);
  return value;
}

export const feishuChannel = defineChannel({
  name: "feishu",
  description: "Feishu / Lark app: long connection or webhook, streamed Markdown cards.",
  configSchema: FeishuConfigSchema,
  webhookPath: (config) => (config.mode === "webhook" ? config.webhook.path : undefined),
  policy: (config) => feishuPolicy(config),
  environment: { FEISHU_APP_ID: "appId", FEISHU_APP_SECRET: "appSecret", FEISHU_DOMAIN: "domain" },
  async create(config, dependencies) {
    const appId = required(config, "appId", "FEISHU_APP_ID");
    const appSecret = required(config, "appSecret", "FEISHU_APP_SECRET");
    if (config.mode === "longConnection" && !APP_ID_PATTERN.test(appId)) {
      // The SDK's WSClient would start, log one line and never connect.
      throw new ConfigError("channels.feishu.appId must look like cli_ followed by 16 hex characters for the long connection", "channels.feishu.appId");
    }
    if (config.mode === "webhook" && !config.encryptKey) {
      throw new ConfigError("channels.feishu webhook mode needs encryptKey: without it Feishu signs nothing and a forged request could not be told apart", "channels.feishu.encryptKey");
    }
    const { createFeishuAdapter } = await import("./feishu-adapter.js");
    const adapter = createFeishuAdapter({
      appId,
      appSecret,
      domain: domainUrl(config.domain),
      mode: config.mode,
      encryptKey: config.encryptKey,
      verificationToken: config.verificationToken,
      groupSessionScope: config.groupSessionScope,
      maxImageBytes: config.maxImageBytes,
      maxFileBytes: config.maxFileBytes,
      downloadDir: path.join(dependencies.dataDir, "media", "feishu"),
      logger: dependencies.logger,
      silenceTimeoutMs: config.silenceTimeoutMs,
      ...(dependencies.now ? { now: dependencies.now } : {}),
    });
    return {
      adapter,
      policy: feishuPolicy(config),
      quotas: withLimits(feishuQuotas, config.limits, "channels.feishu.limits"),
      teamProgress: config.teamProgress,
      ...(config.mode === "webhook" ? { webhook: { path: config.webhook.path, handle: adapter.webhook } } : {}),
      account: createHash("sha256").update(appId).digest("hex").slice(0, 16),
      // The same message always makes the same inbound id, so its reply's ids (and uuids) repeat too.
      inboundIdOf: (event) => `feishu-${event.platformMessageId}`,
      // Finals carry `outbound`, drafts do not: the adapter splits a final over cards, never a draft.
      annotateSends: true,
    };
  },
});

function feishuPolicy(config: FeishuConfig): AdmissionPolicy {
  return { allowFrom: [...config.allowFrom, ...config.allowChats], groupPolicy: config.groupPolicy, groupContext: config.groupContext, rateLimit: { messages: config.rateLimitPerMinute, perMs: 60_000 } };
}
