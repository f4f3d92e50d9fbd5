/** The Feishu plugin's config and create(), the card limits, and mention detection failing closed. */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { cardLimits, countTables, fitCards, markdownCard } from "../../../channels/feishu/cards.js";
import { toPlatformEvent } from "../../../channels/feishu/inbound-event.js";
import { MessageEventSchema, flattenEnvelope } from "../../../channels/feishu/event-schema.js";
import { feishuChannel } from "../../../channels/feishu/plugin.js";
import { ConfigError } from "../../../src/errors.js";
import { buildEvent } from "../../support/feishu-events.js";
import { APP_ID } from "./feishu-support.js";

const dependencies = { logger: pino({ level: "silent" }), dataDir: "/tmp/countbot-feishu-plugin", bus: { broadcast: async () => undefined, onBroadcast: async () => ({ close: async () => undefined }), watchDrafts: async () => ({ close: async () => undefined }) } };
const parse = (input: unknown) => feishuChannel.configSchema.parse(input);

describe("Feishu plugin", () => {
  it("documents every field, defaults to off, long connection, chat sessions", () => {
    const config = parse({});
    expect(config).toMatchObject({ enabled: false, mode: "longConnection", domain: "feishu", groupPolicy: "mention", groupSessionScope: "chat", webhook: { path: "/feishu/webhook" } });
    expect(feishuChannel.environment).toEqual({ FEISHU_APP_ID: "appId", FEISHU_APP_SECRET: "appSecret", FEISHU_DOMAIN: "domain" });
    const shape = (feishuChannel.configSchema as unknown as { shape: Record<string, { description?: string }> }).shape;
    for (const [field, schema] of Object.entries(shape)) expect(schema.description, field).toBeTruthy();
    expect(() => parse({ unknownField: true })).toThrow();
    expect(() => parse({ domain: "not a url" })).toThrow();
  });

  it("names the missing field in its ConfigError", async () => {
    const failure = (input: unknown) =>
      feishuChannel.create(parse({ enabled: true, ...(input as object) }), dependencies).then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(await failure({ appSecret: "s" })).toMatchObject({ path: "channels.feishu.appId" });
    expect(await failure({ appId: APP_ID })).toMatchObject({ path: "channels.feishu.appSecret" });
    expect(await failure({ appId: "my-app", appSecret: "s" })).toMatchObject({ path: "channels.feishu.appId" });
    expect(await failure({ appId: APP_ID, appSecret: "s", mode: "webhook" })).toMatchObject({ path: "channels.feishu.encryptKey" });
    expect(await failure({ appId: APP_ID, appSecret: "s", mode: "webhook" })).toBeInstanceOf(ConfigError);
  });

  it("builds the channel: account from the app id, allowlist of senders and chats, the webhook route", async () => {
    const instance = await feishuChannel.create(
      parse({ enabled: true, appId: APP_ID, appSecret: "s", mode: "webhook", encryptKey: "k", allowFrom: ["ou_a"], allowChats: ["oc_b"], domain: "lark" }),
      dependencies,
    );
    expect(instance.account).toMatch(/^[0-9a-f]{16}$/);
    expect(instance.account).not.toContain(APP_ID);
    expect(instance.policy).toMatchObject({ allowFrom: ["ou_a", "oc_b"], groupPolicy: "mention", rateLimit: { messages: 10, perMs: 60_000 } });
    expect(instance.webhook?.path).toBe("/feishu/webhook");
    expect(instance.adapter.name).toBe("feishu");
    expect(instance.annotateSends).toBe(true);
    const longConnection = await feishuChannel.create(parse({ enabled: true, appId: APP_ID, appSecret: "s" }), dependencies);
    expect(longConnection.webhook).toBeUndefined();
  });
});

describe("Feishu cards", () => {
  it("counts tables outside code blocks only", () => {
    const table = "| a | b |\n|---|:---:|\n| 1 | 2 |";
    expect(countTables(`${table}\n\n${table}`)).toBe(2);
    expect(countTables(`\`\`\`\n${table}\n\`\`\``)).toBe(0);
  });

  it("fits a text into cards under every limit", () => {
    const wide = "汉字".repeat(8_000);
    const parts = fitCards(wide);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) expect(Buffer.byteLength(markdownCard(part).content)).toBeLessThanOrEqual(cardLimits.maxBytes);
    expect(parts.join("")).toBe(wide);
    const table = "| a | b |\n|---|---|\n| 1 | 2 |";
    const tables = Array.from({ length: 12 }, () => table).join("\n\n");
    for (const part of fitCards(tables)) expect(countTables(part)).toBeLessThanOrEqual(cardLimits.maxTables);
  });
});

describe("Feishu mentions fail closed", () => {
  it("counts no mention while the bot's open_id is unknown", async () => {
    const envelope = buildEvent(
      { chatId: "oc_g", chatType: "group", sender: { openId: "ou_a", name: "A" }, mentions: [{ openId: "ou_bot", name: "CountBot" }], text: "hi" },
      { appId: APP_ID },
    );
    const event = MessageEventSchema.parse(flattenEnvelope(envelope as unknown as Record<string, unknown>));
    const context = { scope: "chat" as const, download: async () => ({ note: "" }), sentByBot: () => false, now: () => 1 };
    const unknown = await toPlatformEvent(event, { ...context, bot: undefined }, new AbortController().signal);
    expect(unknown.mentionsBot).toBe(false);
    const known = await toPlatformEvent(event, { ...context, bot: { openId: "ou_bot", name: "CountBot" } }, new AbortController().signal);
    expect(known.mentionsBot).toBe(true);
  });
});
