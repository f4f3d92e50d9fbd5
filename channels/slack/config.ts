/**
 * The `channels.slack` section. A Slack app has three credentials: the bot token (`xoxb-…`, every
 * Web API call), the app-level token (`xapp-…` with `connections:write`, Socket Mode only) and
 * the signing secret (the Events API over HTTP only). They usually come from SLACK_BOT_TOKEN,
 * SLACK_APP_TOKEN and SLACK_SIGNING_SECRET, and are masked wherever the config is printed.
 */
import { z } from "zod";
import { groupSettingsShape, limitsSchema } from "../../src/gateway/kit/index.js";
import { slackQuotas } from "./quotas.js";

const positiveInt = z.number().int().positive();
const slackIds = (what: string, pattern: RegExp, hint: string) => z.array(z.string().regex(pattern, hint)).default([]).describe(what);

export const SlackConfigSchema = z.strictObject({
  enabled: z.boolean().default(false).describe("Run the Slack channel."),
  ...groupSettingsShape,
  botToken: z.string().startsWith("xoxb-", "a bot token starts with xoxb-").optional().describe("Bot User OAuth Token (`xoxb-…`, OAuth & Permissions page; secret); SLACK_BOT_TOKEN."),
  appToken: z
    .string()
    .startsWith("xapp-", "an app-level token starts with xapp-")
    .optional()
    .describe("App-level token with the `connections:write` scope (`xapp-…`, Basic Information page; secret), for Socket Mode; SLACK_APP_TOKEN."),
  signingSecret: z.string().optional().describe("Signing Secret (Basic Information page; secret), for the Events API over HTTP; SLACK_SIGNING_SECRET."),
  mode: z
    .enum(["socket", "http"])
    .default("socket")
    .describe("`socket`: the app dials out to Slack over Socket Mode (no public URL); `http`: Slack posts events and slash commands to `webhook.path`, signed with the signing secret."),
  apiUrl: z.url().default("https://slack.com/api/").describe("Root of the Web API (Socket Mode's URL comes from apps.connections.open under it); for proxies and tests. SLACK_API_URL."),
  webhook: z
    .strictObject({
      path: z.string().startsWith("/").default("/slack/events").describe("Path on the gateway's HTTP server for the Events API Request URL and the slash commands' Request URL."),
    })
    .prefault({})
    .describe("HTTP mode settings."),
  allowFrom: slackIds("Member ids (`U…`/`W…`, a profile's ⋮ → Copy member ID) allowed to talk to the bot anywhere. Empty, with allowChannels empty too, denies everyone not approved through pairing.", /^[UW][A-Z0-9]{2,}$/, "a Slack member id: U or W, then capitals and digits"),
  allowChannels: slackIds("Channel ids (`C…`/`G…`) whose every member may talk to the bot there and in its threads.", /^[CG][A-Z0-9]{2,}$/, "a Slack channel id: C or G, then capitals and digits"),
  groupPolicy: z
    .enum(["mention", "all", "off"])
    .default("mention")
    .describe("In channels and their threads: answer only when @mentioned or in a thread the bot started or answered in, always, or never. DMs are always answered."),
  threads: z
    .strictObject({
      inheritParent: z
        .boolean()
        .default(true)
        .describe("A thread is always its own session; on, its messages carry the channel's id (metadata.parentChatId) and a new thread starts from the channel's last history entries."),
    })
    .prefault({})
    .describe("Threads."),
  rateLimitPerMinute: positiveInt.max(10_000).default(10).describe("Messages one sender may send per minute; beyond it they get one short notice, then silence."),
  maxImageBytes: positiveInt.default(10 * 1024 * 1024).describe("Images larger than this are not downloaded; the model gets a note instead."),
  maxFileBytes: positiveInt.default(20 * 1024 * 1024).describe("Other files larger than this are not downloaded; the model gets their name instead."),
  limits: limitsSchema(slackQuotas),
});

export type SlackConfig = z.infer<typeof SlackConfigSchema>;
