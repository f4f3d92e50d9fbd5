/**
 * The DingTalk plugin: `channels.dingtalk` in the config, DINGTALK_CLIENT_ID / DINGTALK_CLIENT_SECRET
 * / DINGTALK_API_ROOT in the environment. The adapter, and the Stream SDK with it, is imported only
 * when the channel is created (see ChannelPlugin).
 */
import { createHash } from "node:crypto";
import path from "node:path";
import { ConfigError } from "../../src/errors.js";
import { type AdmissionPolicy, defineChannel, withLimits } from "../../src/gateway/kit/index.js";
import { type DingTalkConfig, DingTalkConfigSchema } from "./config.js";
import { dingtalkQuotas } from "./quotas.js";

export type { DingTalkConfig } from "./config.js";

function required(config: DingTalkConfig, field: "appKey" | "appSecret", variable: string): string {
  const value = config[field];
  if (!value) throw new ConfigError(`channels.dingtalk is enabled but has no ${field}: set ${variable} or channels.dingtalk.${field}`, `channels.dingtalk.${field}`);
  return value;
}

/** Who may talk to the bot: users by staffId or DingTalk id, and every member of the listed groups. */
export function dingtalkPolicy(config: DingTalkConfig): AdmissionPolicy {
  return { allowFrom: [...config.allowFrom, ...config.allowChats], groupPolicy: config.groupPolicy, groupContext: config.groupContext, rateLimit: { messages: config.rateLimitPerMinute, perMs: 60_000 } };
}

export const dingtalkChannel = defineChannel({
  name: "dingtalk",
  description: "DingTalk robot of an enterprise internal app: Stream mode or HTTP callback, replies streamed into an AI card.",
  configSchema: DingTalkConfigSchema,
  webhookPath: (config) => (config.mode === "http" ? config.webhook.path : undefined),
  environment: { DINGTALK_CLIENT_ID: "appKey", DINGTALK_CLIENT_SECRET: "appSecret", DINGTALK_API_ROOT: "apiRoot" },
  policy: (config) => dingtalkPolicy(config),
  async create(config, dependencies) {
    const appKey = required(config, "appKey", "DINGTALK_CLIENT_ID");
    const appSecret = required(config, "appSecret", "DINGTALK_CLIENT_SECRET");
    const { createDingTalkAdapter } = await import("./dingtalk-adapter.js");
    const adapter = createDingTalkAdapter({
      appKey,
      appSecret,
      robotCode: config.robotCode ?? appKey,
      ...(config.robotName ? { robotName: config.robotName } : {}),
      apiRoot: config.apiRoot,
      mode: config.mode,
      aiCard: config.aiCard,
      maxImageBytes: config.maxImageBytes,
      maxFileBytes: config.maxFileBytes,
      downloadDir: path.join(dependencies.dataDir, "media", "dingtalk"),
      logger: dependencies.logger,
      ...(dependencies.now ? { now: dependencies.now } : {}),
    });
    return {
      adapter,
      policy: dingtalkPolicy(config),
      quotas: withLimits(dingtalkQuotas, config.limits, "channels.dingtalk.limits"),
      teamProgress: config.teamProgress,
      ...(config.mode === "http" ? { webhook: { path: config.webhook.path, handle: adapter.webhook } } : {}),
      // The account is named by a hash of the app key: one gateway holds the Stream connection.
      account: createHash("sha256").update(appKey).digest("hex").slice(0, 16),
      // The same message always makes the same inbound id, so its reply's ids repeat too.
      inboundIdOf: (event) => `dingtalk-${event.platformMessageId}`,
      // Finals carry `outbound`, drafts do not: the adapter finishes a card on a final only.
      annotateSends: true,
    };
  },
});
