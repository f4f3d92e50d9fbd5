/**
 * The `channels.dingtalk` section. The app's credentials are named `appKey` / `appSecret` (the
 * console now calls them Client ID / Client Secret) so that `appSecret` is masked wherever the
 * config is printed; they usually come from DINGTALK_CLIENT_ID / DINGTALK_CLIENT_SECRET.
 */
import { z } from "zod";
import { groupSettingsShape, limitsSchema } from "../../src/gateway/kit/index.js";
import { dingtalkQuotas } from "./quotas.js";

const positiveInt = z.number().int().positive();

/** DingTalk's own AI card template (the one its SDKs stream into): a Markdown body `msgContent` and a `flowStatus`. */
export const DEFAULT_CARD_TEMPLATE = "382e4302-551d-4880-bf29-a30acfab2e71.schema";

export const DingTalkConfigSchema = z.strictObject({
  enabled: z.boolean().default(false).describe("Run the DingTalk channel."),
  ...groupSettingsShape,
  appKey: z.string().optional().describe("Client ID (formerly AppKey) of the enterprise internal app; DINGTALK_CLIENT_ID."),
  appSecret: z.string().optional().describe("Client Secret (formerly AppSecret) of the app (secret); DINGTALK_CLIENT_SECRET. It also signs HTTP callbacks."),
  robotCode: z.string().optional().describe("The robot's code (Robot configuration page). Default: the appKey, which it is for a robot of an enterprise internal app."),
  robotName: z
    .string()
    .optional()
    .describe("The robot's name as groups show it. Optional: DingTalk removes the robot's own @ from the text; a leading `@<robotName>` left in it is stripped too."),
  apiRoot: z
    .url()
    .default("https://api.dingtalk.com")
    .describe("Root of the OpenAPI (tokens, messages, cards, files) and of the Stream gateway (`/v1.0/gateway/connections/open`); for proxies and tests. DINGTALK_API_ROOT."),
  mode: z
    .enum(["stream", "http"])
    .default("stream")
    .describe("`stream`: the app dials out to DingTalk over the Stream long connection (no public URL needed); `http`: DingTalk posts each message to `webhook.path` on the gateway, signed with the appSecret."),
  webhook: z
    .strictObject({
      path: z.string().startsWith("/").default("/dingtalk/webhook").describe("Path on the gateway's HTTP server that DingTalk posts messages to (the message receiving address ends with it)."),
    })
    .prefault({})
    .describe("HTTP mode settings."),
  allowFrom: z
    .array(z.string())
    .default([])
    .describe("Senders allowed to talk to the bot, by their user id (staffId, as the admin console shows it) or their DingTalk id (`$:LWCP_v1:$…`). Empty denies everyone not approved through pairing."),
  allowChats: z.array(z.string()).default([]).describe("Group conversations (`cid…`, the openConversationId) whose every member may talk to the bot."),
  groupPolicy: z
    .enum(["mention", "all", "off"])
    .default("mention")
    .describe("In group chats: answer only when the robot is @mentioned (DingTalk's isInAtList / atUsers), always, or never. DingTalk itself delivers only @-messages of a group to a robot."),
  rateLimitPerMinute: positiveInt.max(10_000).default(10).describe("Messages one sender may send per minute; beyond it they get one short notice, then silence."),
  aiCard: z
    .strictObject({
      enabled: z.boolean().default(true).describe("Stream replies into an AI card updated in place (needs the Card.Instance.Write and Card.Streaming.Write permissions). Off: only the final reply is sent."),
      templateId: z.string().min(1).default(DEFAULT_CARD_TEMPLATE).describe("The card template: DingTalk's AI card by default, or your own from the card builder."),
      contentKey: z.string().min(1).default("msgContent").describe("The template's streamed Markdown variable."),
      settleMs: positiveInt
        .default(15_000)
        .describe("A card no update reached for this long is marked finished with the text it shows (a reply whose last streamed text already was the final one gets no final update)."),
    })
    .prefault({})
    .describe("Streamed replies."),
  maxImageBytes: positiveInt.default(10 * 1024 * 1024).describe("Images larger than this are not downloaded; the model gets a note instead."),
  maxFileBytes: positiveInt.default(20 * 1024 * 1024).describe("Files larger than this are not downloaded; the model gets their name instead."),
  limits: limitsSchema(dingtalkQuotas),
});

export type DingTalkConfig = z.infer<typeof DingTalkConfigSchema>;
