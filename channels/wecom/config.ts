/**
 * The `channels.wecom` section: a self-built application (自建应用) of a WeCom corp. The secrets are
 * named so that `countbot config` masks them: `secret` (the application's Secret), `token` and
 * `encryptKey` (the callback's Token and EncodingAESKey). They usually come from the environment:
 * WECOM_CORP_ID, WECOM_AGENT_ID, WECOM_SECRET, WECOM_TOKEN, WECOM_ENCODING_AES_KEY.
 */
import { z } from "zod";
import { groupSettingsShape, limitsSchema } from "../../src/gateway/kit/index.js";
import { wecomQuotas } from "./quotas.js";

const positiveInt = z.number().int().positive();

export const WeComConfigSchema = z.strictObject({
  enabled: z.boolean().default(false).describe("Run the WeCom (企业微信) channel."),
  ...groupSettingsShape,
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
