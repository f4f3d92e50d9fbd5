/**
 * The `channels.wecom` section, in one of two modes:
 *
 * - `app`: a self-built application (自建应用) of a WeCom corp, its encrypted callback in and the
 *   application message API out. The secrets are named so that `countbot config` masks them:
 *   `secret` (the application's Secret), `token` and `encryptKey` (the callback's Token and
 *   EncodingAESKey); usually from WECOM_CORP_ID, WECOM_AGENT_ID, WECOM_SECRET, WECOM_TOKEN,
 *   WECOM_ENCODING_AES_KEY.
 * - `robot`: an intelligent robot (智能机器人) over its long connection, in one-to-one chats and
 *   groups, replies streamed; `robot.botId` and `robot.secret` (WECOM_BOT_ID, WECOM_BOT_SECRET).
 */
import { z } from "zod";
import { groupSettingsShape, limitsSchema } from "../../src/gateway/kit/index.js";
import { wecomQuotas } from "./quotas.js";

const positiveInt = z.number().int().positive();

export const WeComConfigSchema = z.strictObject({
  enabled: z.boolean().default(false).describe("Run the WeCom (企业微信) channel."),
  ...groupSettingsShape,
  mode: z
    .enum(["app", "robot"])
    .default("app")
    .describe("`app`: a self-built application, WeCom calls the gateway's callback URL; `robot`: an intelligent robot, the gateway dials WeCom's long connection (no public URL), groups and streamed replies."),
  robot: z
    .strictObject({
      botId: z.string().optional().describe("The intelligent robot's Bot ID (智能机器人 → API mode: long connection); WECOM_BOT_ID."),
      secret: z.string().optional().describe("The robot's Secret (secret); WECOM_BOT_SECRET."),
      wsUrl: z.string().regex(/^wss?:\/\//, "expected a ws:// or wss:// URL").default("wss://openws.work.weixin.qq.com").describe("The long connection's URL (a private deployment shows its own); WECOM_BOT_WS_URL."),
      name: z
        .string()
        .optional()
        .describe("The robot's name as groups show it. Set: a group message counts as addressed only when it carries `@<name>` (WeCom writes it into the text). Unset: every group message WeCom delivers (only @-messages) counts."),
      settleMs: positiveInt.default(15_000).describe("A streamed reply no update reached for this long is finished with the text it shows."),
    })
    .prefault({})
    .describe("Robot mode settings."),
  corpId: z.string().optional().describe("The corp's ID (企业ID, My Company → Company Info); WECOM_CORP_ID. Decrypted callbacks must name it."),
  agentId: z
    .string()
    .regex(/^\d+$/, "expected the application's numeric AgentId")
    .optional()
    .describe("The self-built application's AgentId (App Management → the app); WECOM_AGENT_ID."),
  secret: z.string().optional().describe("The application's Secret (secret); WECOM_SECRET. Exchanged for the access token."),
  token: z.string().optional().describe("The callback's Token (secret, API接收消息 settings); WECOM_TOKEN. Signs every callback."),
  encryptKey: z
    .string()
    .regex(/^[A-Za-z0-9+/]{43}$/, "expected the 43-character EncodingAESKey")
    .optional()
    .describe("The callback's EncodingAESKey (secret, 43 characters); WECOM_ENCODING_AES_KEY. Decrypts every callback."),
  apiRoot: z.url().default("https://qyapi.weixin.qq.com").describe("Root of the server API (gettoken, message/send, media/get); for proxies and tests. WECOM_API_ROOT."),
  webhook: z
    .strictObject({
      path: z.string().startsWith("/").default("/wecom/callback").describe("Path on the gateway's HTTP server that WeCom calls (the URL of API接收消息 ends with it)."),
    })
    .prefault({})
    .describe("The callback."),
  allowFrom: z
    .array(z.string())
    .default([])
    .describe("Members allowed to talk to the bot, by their UserID (账号, as the admin console shows it). Empty denies everyone not approved through pairing."),
  allowChats: z.array(z.string()).default([]).describe("Chats whose every member may talk to the bot, by chat id."),
  groupPolicy: z.enum(["mention", "all", "off"]).default("mention").describe("In group chats: answer only when the bot is @mentioned, always, or never."),
  rateLimitPerMinute: positiveInt.max(10_000).default(10).describe("Messages one sender may send per minute; beyond it they get one short notice, then silence."),
  maxImageBytes: positiveInt.default(10 * 1024 * 1024).describe("Images larger than this are not downloaded; the model gets a note instead."),
  maxFileBytes: positiveInt.default(20 * 1024 * 1024).describe("Files, voice notes and videos larger than this are not downloaded; the model gets a note instead."),
  limits: limitsSchema(wecomQuotas),
});

export type WeComConfig = z.infer<typeof WeComConfigSchema>;
