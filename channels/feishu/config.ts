/**
 * The `channels.feishu` config section. Secrets (appSecret, encryptKey, verificationToken) are
 * usually given as `${VAR}` references or through FEISHU_APP_SECRET.
 */
import { z } from "zod";
import { groupSettingsShape, limitsSchema } from "../../src/gateway/kit/index.js";
import { feishuQuotas } from "./quotas.js";

const positiveInt = z.number().int().positive();

/** What a self-built app's id looks like: the SDK's long connection never connects with another. */
export const APP_ID_PATTERN = /^cli_[0-9a-fA-F]{16}$/;

/** Where the open platform is: the two public ones by name, or a URL (private deployment, tests). */
export const domains = { feishu: "https://open.feishu.cn", lark: "https://open.larksuite.com" } as const;

export const FeishuConfigSchema = z.strictObject({
  enabled: z.boolean().default(false).describe("Run the Feishu / Lark channel."),
  appId: z.string().optional().describe("App ID of the self-built app (`cli_` + 16 hex characters); FEISHU_APP_ID."),
  appSecret: z.string().optional().describe("App secret (secret); FEISHU_APP_SECRET."),
  domain: z
    .union([z.enum(["feishu", "lark"]), z.url()])
    .default("feishu")
    .describe("Open platform: `feishu` (open.feishu.cn), `lark` (open.larksuite.com, Lark international), or the URL of a private deployment or test server; FEISHU_DOMAIN."),
  mode: z
    .enum(["longConnection", "webhook"])
    .default("longConnection")
    .describe("`longConnection`: the app dials out to Feishu (no public URL needed); `webhook`: Feishu posts events to `webhook.path` on the gateway."),
  encryptKey: z
    .string()
    .optional()
    .describe("Encrypt Key (secret) from Events and Callbacks > Encryption Strategy. Required in webhook mode: it signs every request and decrypts encrypted bodies."),
  verificationToken: z
    .string()
    .optional()
    .describe("Verification Token (secret) from the same page; when set, events and challenges must carry it too."),
  webhook: z
    .strictObject({
      path: z.string().startsWith("/").default("/feishu/webhook").describe("Path on the gateway's HTTP server that Feishu posts events to (the request URL ends with it)."),
    })
    .prefault({})
    .describe("Webhook mode settings."),
  allowFrom: z
    .array(z.string())
    .default([])
    .describe("Senders allowed to talk to the bot, by open_id (`ou_…`) or user_id. Empty denies everyone not approved through pairing."),
  allowChats: z.array(z.string()).default([]).describe("Chats (`oc_…`) whose every member may talk to the bot."),
  groupPolicy: z
    .enum(["mention", "all", "off"])
    .default("mention")
    .describe("In group chats: answer only when the bot is @mentioned (by its own open_id; @all does not count), always, or never."),
  ...groupSettingsShape,
  groupSessionScope: z
    .enum(["chat", "thread"])
    .default("chat")
    .describe("`chat`: one session per chat; `thread`: a topic thread is a session of its own, and replies stay in it."),
  rateLimitPerMinute: positiveInt.max(10_000).default(10).describe("Messages one sender may send per minute; beyond it they get one short notice, then silence."),
  maxImageBytes: positiveInt.default(10 * 1024 * 1024).describe("Images larger than this are not downloaded; the model gets a note instead (Feishu images are at most 10 MB)."),
  maxFileBytes: positiveInt.default(20 * 1024 * 1024).describe("Files larger than this are not downloaded; the model gets their name instead."),
  silenceTimeoutMs: positiveInt
    .optional()
    .describe("Long connection: reconnect when no frame (pong or event) arrived for this long. Default three ping intervals as Feishu sets them (6 minutes); at least one and a half (a healthy connection is silent for one between two pongs)."),
  limits: limitsSchema(feishuQuotas),
});

export type FeishuConfig = z.infer<typeof FeishuConfigSchema>;

export function domainUrl(domain: FeishuConfig["domain"]): string {
  return (domain === "feishu" || domain === "lark" ? domains[domain] : domain).replace(/\/+$/, "");
}
