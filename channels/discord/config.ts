/** The `channels.discord` section. */
import { z } from "zod";
import { groupSettingsShape, limitsSchema } from "../../src/gateway/kit/index.js";
import { discordQuotas } from "./quotas.js";

const snowflakes = (what: string) =>
  z
    .array(z.string().regex(/^\d{1,20}$/, "a Discord id: digits only (Developer Mode → Copy ID)"))
    .default([])
    .describe(what);

export const DiscordConfigSchema = z.strictObject({
  enabled: z.boolean().default(false).describe("Run the Discord channel."),
  token: z.string().optional().describe("Bot token (secret), from the Developer Portal's Bot page."),
  apiRoot: z
    .url()
    .optional()
    .describe("REST API root, default https://discord.com/api (a trailing /v10 is accepted); for proxies and tests. The gateway URL comes from GET /gateway/bot under it."),
  allowFrom: z
    .array(z.string())
    .default([])
    .describe("User ids allowed to talk to the bot anywhere (DMs, guild channels, threads). Empty, with the lists below empty too, denies everyone not approved through pairing."),
  allowGuilds: snowflakes("Guild (server) ids whose members may talk to the bot in that guild's channels and threads (not in DMs). Empty denies."),
  allowChannels: snowflakes("Channel ids where anyone may talk to the bot; a thread is allowed when its parent channel is. Empty denies."),
  allowRoles: snowflakes("Role ids whose members may talk to the bot in the role's guild. Empty denies."),
  groupPolicy: z
    .enum(["mention", "all", "off"])
    .default("mention")
    .describe("In guild channels and threads: answer only when @mentioned (the bot, or its role) or replied to, always, or never. DMs are always answered."),
  ...groupSettingsShape,
  threads: z
    .strictObject({
      inheritParent: z
        .boolean()
        .default(false)
        .describe("A thread is always its own session; on, its messages carry the parent channel's id (metadata.parentChatId) and a new thread starts from the parent channel's last 10 history entries, kept in the thread's own history."),
    })
    .prefault({})
    .describe("Threads."),
  rateLimitPerMinute: z.number().int().positive().max(10_000).default(10).describe("Messages one sender may send per minute; beyond it they get one short notice, then silence."),
  maxImageBytes: z
    .number()
    .int()
    .positive()
    .default(10 * 1024 * 1024)
    .describe("Image, voice-message and audio attachments larger than this are not downloaded; the model gets a note instead. Other files are only named in the text."),
  registerCommands: z
    .boolean()
    .default(false)
    .describe("Register /new /stop /status /help as global slash commands on start and answer them; typed commands work either way."),
  limits: limitsSchema(discordQuotas),
});

export type DiscordConfig = z.infer<typeof DiscordConfigSchema>;
