/**
 * Discord as a channel plugin: the gateway + REST adapter and its admission policy. The adapter,
 * and discord.js with it, is imported only when the channel is created (see ChannelPlugin).
 */
import { createHash } from "node:crypto";
import path from "node:path";
import { ConfigError } from "../../src/errors.js";
import { type AdmissionPolicy, defineChannel, withLimits } from "../../src/gateway/kit/index.js";
import { type DiscordConfig, DiscordConfigSchema } from "./config.js";
import { discordQuotas } from "./quotas.js";

/**
 * Who may talk to the bot: user ids as they are, and the guild, channel and role lists as the
 * scopes the adapter puts on every guild event (`guild:<id>`, `channel:<id>`, `role:<id>`).
 */
export function discordPolicy(config: DiscordConfig): AdmissionPolicy {
  return {
    allowFrom: [
      ...config.allowFrom,
      ...config.allowGuilds.map((id) => `guild:${id}`),
      ...config.allowChannels.map((id) => `channel:${id}`),
      ...config.allowRoles.map((id) => `role:${id}`),
    ],
    groupPolicy: config.groupPolicy,
    groupContext: config.groupContext,
    rateLimit: { messages: config.rateLimitPerMinute, perMs: 60_000 },
  };
}

export const discordChannel = defineChannel({
  name: "discord",
  description: "Discord bot (gateway + REST): DMs, guild channels and threads.",
  configSchema: DiscordConfigSchema,
  environment: { DISCORD_BOT_TOKEN: "token", DISCORD_API_ROOT: "apiRoot" },
  policy: (config) => discordPolicy(config),
  async create(config, { logger, dataDir, now }) {
    if (!config.token) throw new ConfigError("channels.discord is enabled but has no token: set DISCORD_BOT_TOKEN or channels.discord.token", "channels.discord.token");
    const { createDiscordAdapter } = await import("./discord-adapter.js");
    const adapter = createDiscordAdapter({
      token: config.token,
      apiRoot: config.apiRoot,
      maxImageBytes: config.maxImageBytes,
      downloadDir: path.join(dataDir, "media", "discord"),
      inheritParent: config.threads.inheritParent,
      registerCommands: config.registerCommands,
      logger,
      now,
    });
    return {
      adapter,
      policy: discordPolicy(config),
      quotas: withLimits(discordQuotas, config.limits, "channels.discord.limits"),
      teamProgress: config.teamProgress,
      // The account is named by a hash of the token: the token itself must not become a key.
      account: createHash("sha256").update(config.token).digest("hex").slice(0, 16),
    };
  },
});
