/**
 * The Slack plugin: `channels.slack` in the config, SLACK_BOT_TOKEN / SLACK_APP_TOKEN /
 * SLACK_SIGNING_SECRET / SLACK_API_URL in the environment. The adapter, and the Slack SDK with it,
 * is imported only when the channel is created (see ChannelPlugin).
 */
import { createHash } from "node:crypto";
import path from "node:path";
import { ConfigError } from "../../src/errors.js";
import { type AdmissionPolicy, defineChannel, withLimits } from "../../src/gateway/kit/index.js";
import { type SlackConfig, SlackConfigSchema } from "./config.js";
import { slackQuotas } from "./quotas.js";

export type { SlackConfig } from "./config.js";

function required(config: SlackConfig, field: "botToken" | "appToken" | "signingSecret", variable: string, why: string): string {
  const value = config[field];
  if (!value) throw new ConfigError(`channels.slack is enabled${why} but has no ${field}: set ${variable} or channels.slack.${field}`, `channels.slack.${field}`);
  return value;
}

/** Who may talk to the bot: members by id, and every member of the listed channels (there and in their threads). */
export function slackPolicy(config: SlackConfig): AdmissionPolicy {
  return {
    allowFrom: [...config.allowFrom, ...config.allowChannels.map((id) => `channel:${id}`)],
    groupPolicy: config.groupPolicy,
    groupContext: config.groupContext,
    rateLimit: { messages: config.rateLimitPerMinute, perMs: 60_000 },
  };
}

export const slackChannel = defineChannel({
  name: "slack",
  description: "Slack app bot: Socket Mode or the Events API over HTTP; DMs, channels, threads and slash commands, replies streamed by editing one message.",
  configSchema: SlackConfigSchema,
  webhookPath: (config) => (config.mode === "http" ? config.webhook.path : undefined),
  environment: { SLACK_BOT_TOKEN: "botToken", SLACK_APP_TOKEN: "appToken", SLACK_SIGNING_SECRET: "signingSecret", SLACK_API_URL: "apiUrl" },
  policy: (config) => slackPolicy(config),
  async create(config, dependencies) {
    const botToken = required(config, "botToken", "SLACK_BOT_TOKEN", "");
    const appToken = config.mode === "socket" ? required(config, "appToken", "SLACK_APP_TOKEN", " in socket mode") : undefined;
    const signingSecret = config.mode === "http" ? required(config, "signingSecret", "SLACK_SIGNING_SECRET", " in http mode") : undefined;
    const { createSlackAdapter } = await import("./slack-adapter.js");
    const adapter = createSlackAdapter({
      botToken,
      ...(appToken ? { appToken } : {}),
      ...(signingSecret ? { signingSecret } : {}),
      mode: config.mode,
      apiUrl: config.apiUrl,
      inheritParent: config.threads.inheritParent,
      filesUnaddressed: config.groupPolicy === "all",
      maxImageBytes: config.maxImageBytes,
      maxFileBytes: config.maxFileBytes,
      downloadDir: path.join(dependencies.dataDir, "media", "slack"),
      logger: dependencies.logger,
      ...(dependencies.now ? { now: dependencies.now } : {}),
    });
    return {
      adapter,
      policy: slackPolicy(config),
      quotas: withLimits(slackQuotas, config.limits, "channels.slack.limits"),
      teamProgress: config.teamProgress,
      ...(config.mode === "http" ? { webhook: { path: config.webhook.path, handle: adapter.webhook } } : {}),
      // The account is named by a hash of the bot token: one gateway holds the connection.
      account: createHash("sha256").update(botToken).digest("hex").slice(0, 16),
      // The same message always makes the same inbound id, so its reply's ids repeat too.
      inboundIdOf: (event) => `slack-${event.eventId}`,
    };
  },
});
