/**
 * The `channels.qq` section: a bot of the QQ open platform (Bot API v2). Its credentials are the
 * AppID and the AppSecret (`appSecret` is masked wherever the config is printed); they usually come
 * from QQ_BOT_APP_ID / QQ_BOT_APP_SECRET.
 */
import { z } from "zod";
import { groupSettingsShape, limitsSchema } from "../../src/gateway/kit/index.js";
import { INTENT_BITS } from "./intents.js";
import { qqQuotas } from "./quotas.js";

const positiveInt = z.number().int().positive();

export const QQConfigSchema = z.strictObject({
  enabled: z.boolean().default(false).describe("Run the QQ channel."),
  ...groupSettingsShape,
  appId: z.string().optional().describe("The bot's AppID (QQ open platform, Development → Development settings); QQ_BOT_APP_ID."),
  appSecret: z
    .string()
    .optional()
    .describe("The bot's AppSecret (secret); QQ_BOT_APP_SECRET. It buys the access token and is the seed of the Ed25519 key that signs webhook callbacks."),
  apiRoot: z
    .url()
    .default("https://api.sgroup.qq.com")
    .describe("Root of the OpenAPI (messages, `/gateway`); the sandbox is https://sandbox.api.sgroup.qq.com. QQ_BOT_API_ROOT."),
  tokenUrl: z.url().default("https://bots.qq.com/app/getAppAccessToken").describe("Where the access token is bought with the AppID and AppSecret. QQ_BOT_TOKEN_URL."),
  mode: z
    .enum(["websocket", "webhook"])
    .default("websocket")
    .describe("`websocket`: the bot dials out to QQ's gateway (no public URL needed); `webhook`: QQ posts each event to `webhook.path` on the gateway, signed with Ed25519."),
  webhook: z
    .strictObject({
      path: z.string().startsWith("/").default("/qq/webhook").describe("Path on the gateway's HTTP server that QQ posts events to (the callback address ends with it)."),
      toleranceSeconds: positiveInt.default(3_600).describe("How far a callback's X-Signature-Timestamp may be from our clock; older or newer ones are refused."),
    })
    .prefault({})
    .describe("Webhook mode settings."),
  intents: z
    .array(z.enum(Object.keys(INTENT_BITS) as [keyof typeof INTENT_BITS, ...Array<keyof typeof INTENT_BITS>]))
    .min(1)
    .default(["groupAndC2C", "publicGuildMessages", "directMessage"])
    .describe(
      "Events the gateway subscribes to: `groupAndC2C` (group @-messages and one-to-one), `publicGuildMessages` (@-messages in guild channels), `directMessage` (guild direct messages), `guildMessages` (every guild channel message: private-domain bots only).",
    ),
  markdown: z
    .boolean()
    .default(false)
    .describe("Send replies as native Markdown messages (msg_type 2; the bot needs the Markdown permission). Off: plain text with the Markdown marks taken out."),
  activeMessages: z
    .strictObject({
      groups: z.boolean().default(false).describe("Send into a group or one-to-one chat outside the reply window as an active message (QQ allows it only to some bots). Off: such a send is reported and dropped."),
      channels: z.boolean().default(true).describe("Send into a guild channel or guild DM outside the reply window as an active message (QQ caps them per day)."),
    })
    .prefault({})
    .describe("What happens to a message QQ's reply window no longer covers."),
  allowFrom: z
    .array(z.string())
    .default([])
    .describe("Senders allowed to talk to the bot: their openid in groups (member_openid) and one-to-one chats (user_openid), their user id in guilds, or their union_openid. Empty denies everyone not approved through pairing."),
  allowChats: z.array(z.string()).default([]).describe("Chats whose every member may talk to the bot, by chat id: `group:<group_openid>` or `channel:<channel_id>`."),
  groupPolicy: z
    .enum(["mention", "all", "off"])
    .default("mention")
    .describe("In groups and guild channels: answer only when the bot is @mentioned, always, or never. QQ itself delivers only @-messages of a group to a bot."),
  rateLimitPerMinute: positiveInt.max(10_000).default(10).describe("Messages one sender may send per minute; beyond it they get one short notice, then silence."),
  limits: limitsSchema(qqQuotas),
});

export type QQConfig = z.infer<typeof QQConfigSchema>;
