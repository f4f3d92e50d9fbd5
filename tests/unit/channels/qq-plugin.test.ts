/** The QQ plugin's config and create(). */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { intentsOf } from "../../../channels/qq/intents.js";
import { qqChannel } from "../../../channels/qq/plugin.js";
import { ConfigError } from "../../../src/errors.js";
import { APP_ID } from "./qq-support.js";

const dependencies = { logger: pino({ level: "silent" }), dataDir: "/tmp/countbot-qq-plugin", bus: { broadcast: async () => undefined, onBroadcast: async () => ({ close: async () => undefined }), watchDrafts: async () => ({ close: async () => undefined }) } };
const parse = (input: unknown) => qqChannel.configSchema.parse(input);

describe("QQ plugin", () => {
  it("documents every field, defaults to off, the WebSocket gateway, plain text, mention gating, no active group messages", () => {
    const config = parse({});
    expect(config).toMatchObject({
      enabled: false,
      mode: "websocket",
      apiRoot: "https://api.sgroup.qq.com",
      markdown: false,
      groupPolicy: "mention",
      activeMessages: { groups: false, channels: true },
      webhook: { path: "/qq/webhook", toleranceSeconds: 3_600 },
      intents: ["groupAndC2C", "publicGuildMessages", "directMessage"],
    });
    expect(intentsOf(config.intents)).toBe((1 << 25) | (1 << 30) | (1 << 12));
    expect(qqChannel.environment).toEqual({ QQ_BOT_APP_ID: "appId", QQ_BOT_APP_SECRET: "appSecret", QQ_BOT_API_ROOT: "apiRoot", QQ_BOT_TOKEN_URL: "tokenUrl" });
    const shape = (qqChannel.configSchema as unknown as { shape: Record<string, { description?: string }> }).shape;
    for (const [field, schema] of Object.entries(shape)) expect(schema.description, field).toBeTruthy();
    expect(() => parse({ unknownField: true })).toThrow();
    expect(() => parse({ mode: "http" })).toThrow();
    expect(() => parse({ intents: ["everything"] })).toThrow();
  });

  it("names the missing field in its ConfigError", async () => {
    const failure = (input: object) => qqChannel.create(parse({ enabled: true, ...input }), dependencies).then(() => undefined, (error: unknown) => error);
    expect(await failure({ appSecret: "s" })).toMatchObject({ path: "channels.qq.appId" });
    expect(await failure({ appId: APP_ID })).toMatchObject({ path: "channels.qq.appSecret" });
    expect(await failure({ appId: APP_ID })).toBeInstanceOf(ConfigError);
  });

  it("builds the channel: account from the AppID, senders and chats allowed, the webhook route in webhook mode only", async () => {
    const webhook = await qqChannel.create(parse({ enabled: true, appId: APP_ID, appSecret: "secret", mode: "webhook", allowFrom: ["OPENID1"], allowChats: ["group:G1"] }), dependencies);
    expect(webhook.account).toMatch(/^[0-9a-f]{16}$/);
    expect(webhook.policy).toMatchObject({ allowFrom: ["OPENID1", "group:G1"], groupPolicy: "mention", rateLimit: { messages: 10, perMs: 60_000 } });
    expect(webhook.webhook?.path).toBe("/qq/webhook");
    expect(webhook.annotateSends).toBe(true);
    expect(webhook.adapter.capabilities.streaming).toBe("none");
    expect(Object.keys(webhook.quotas?.scopes ?? {})).toEqual(["chat", "group", "bot"]);
    expect(webhook.inboundIdOf?.({ platformMessageId: "ROBOT1.0_x" } as never)).toBe("qq-ROBOT1.0_x");
    const websocket = await qqChannel.create(parse({ enabled: true, appId: APP_ID, appSecret: "secret", limits: { group: { limit: 10 } } }), dependencies);
    expect(websocket.webhook).toBeUndefined();
    expect(websocket.quotas?.scopes.group).toMatchObject({ per: "group", limit: 10, windowMs: 60_000 });
  });
});
