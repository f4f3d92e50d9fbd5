/** The `channels.telegram` section. */
import { z } from "zod";
import { groupSettingsShape, limitsSchema } from "../../src/gateway/kit/index.js";
import { telegramQuotas } from "./quotas.js";

export const TelegramConfigSchema = z
  .strictObject({
    enabled: z.boolean().default(false).describe("Run the Telegram channel."),
    token: z.string().optional().describe("Bot token (secret)."),
    apiRoot: z.url().optional().describe("Bot API root, for self-hosted Bot API servers and tests."),
    allowFrom: z.array(z.string()).default([]).describe("User ids and chat ids allowed to talk to the bot. Empty denies everyone."),
    groupPolicy: z.enum(["mention", "all", "off"]).default("mention").describe("In groups: answer only when mentioned or replied to, always, or never."),
    ...groupSettingsShape,
    mode: z.enum(["polling", "webhook"]).default("polling").describe("`polling`: long-poll getUpdates; `webhook`: Telegram posts updates to `webhook.url`."),
    webhook: z
      .strictObject({
        url: z.url().optional().describe("Public HTTPS URL Telegram posts updates to; registered with setWebhook on start."),
        secret: z
          .string()
          .regex(/^[\w-]{1,256}$/, "1-256 characters of A-Z a-z 0-9 _ -")
          .optional()
          .describe("Secret token (secret) Telegram sends in X-Telegram-Bot-Api-Secret-Token; other requests get 401/403."),
        path: z.string().startsWith("/").default("/telegram/webhook").describe("Path of the HTTP API that receives the updates."),
      })
      .optional()
      .describe("Webhook settings; `url` and `secret` are required when `mode` is `webhook`."),
    rateLimitPerMinute: z.number().int().positive().max(10_000).default(10).describe("Messages one sender may send per minute; beyond it they get one short notice, then silence."),
    maxFileBytes: z
      .number()
      .int()
      .positive()
      .default(20 * 1024 * 1024)
      .describe("Photos and documents larger than this are not downloaded; the model gets a note instead (the public Bot API serves at most 20 MB)."),
    limits: limitsSchema(telegramQuotas),
  })
  .superRefine((telegram, context) => {
    if (telegram.mode !== "webhook") return;
    for (const field of ["url", "secret"] as const) {
      if (!telegram.webhook?.[field]) context.addIssue({ code: "custom", message: `webhook mode needs webhook.${field}`, path: ["webhook", field] });
    }
  });

export type TelegramConfig = z.infer<typeof TelegramConfigSchema>;
