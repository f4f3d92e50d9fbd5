/** The WeCom plugin's config and create() in both modes, its Markdown rendering, and the robot's message frames. */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { wecomChannel } from "../../../channels/wecom/plugin.js";
import { renderWeComMarkdown, wecomRenderedBytes } from "../../../channels/wecom/render-markdown.js";
import { RobotFrameBodySchema, toRobotEvent } from "../../../channels/wecom/robot-message.js";
import { ConfigError } from "../../../src/errors.js";
import { newEncodingAESKey } from "../../support/wecom-callback-crypto.js";

const dependencies = { logger: pino({ level: "silent" }), dataDir: "/tmp/countbot-wecom-plugin", bus: { broadcast: async () => undefined, onBroadcast: async () => ({ close: async () => undefined }), watchDrafts: async () => ({ close: async () => undefined }) } };
const parse = (input: unknown) => wecomChannel.configSchema.parse(input);
const app = { corpId: "ww0011", agentId: "1000002", secret: "app-secret", token: "cb-token", encryptKey: newEncodingAESKey() };

describe("WeCom plugin", () => {
  it("documents every field, defaults to off, application mode, mention gating", () => {
    expect(parse({})).toMatchObject({ enabled: false, mode: "app", apiRoot: "https://qyapi.weixin.qq.com", groupPolicy: "mention", webhook: { path: "/wecom/callback" }, robot: { wsUrl: "wss://openws.work.weixin.qq.com" } });
    expect(Object.keys(wecomChannel.environment ?? {})).toEqual(["WECOM_CORP_ID", "WECOM_AGENT_ID", "WECOM_SECRET", "WECOM_TOKEN", "WECOM_ENCODING_AES_KEY", "WECOM_API_ROOT", "WECOM_BOT_ID", "WECOM_BOT_SECRET", "WECOM_BOT_WS_URL"]);
    const shape = (wecomChannel.configSchema as unknown as { shape: Record<string, { description?: string }> }).shape;
    for (const [field, schema] of Object.entries(shape)) expect(schema.description, field).toBeTruthy();
    expect(() => parse({ encryptKey: "too-short" })).toThrow(/43-character EncodingAESKey/);
    expect(() => parse({ agentId: "agent" })).toThrow(/AgentId/);
    expect(() => parse({ mode: "webhook" })).toThrow();
  });

  it("names the missing field in its ConfigError, for each mode", async () => {
    const failure = (input: object) => wecomChannel.create(parse({ enabled: true, ...input }), dependencies).then(() => undefined, (error: unknown) => error);
    expect(await failure({ ...app, secret: undefined })).toMatchObject({ path: "channels.wecom.secret" });
    expect(await failure({ ...app, encryptKey: undefined })).toMatchObject({ path: "channels.wecom.encryptKey" });
    expect(await failure({ mode: "robot", robot: { secret: "s" } })).toMatchObject({ path: "channels.wecom.robot.botId" });
    expect(await failure({ mode: "robot", robot: { botId: "b" } })).toBeInstanceOf(ConfigError);
  });

  it("builds the application: the callback path public, the account hashed, no streaming; the robot: streaming, no callback", async () => {
    const built = await wecomChannel.create(parse({ enabled: true, ...app, allowFrom: ["zhangsan"] }), dependencies);
    expect(built.webhook?.path).toBe("/wecom/callback");
    expect(built.routes).toBeTypeOf("function");
    expect(built.account).toMatch(/^[0-9a-f]{16}$/);
    expect(built.policy).toMatchObject({ allowFrom: ["zhangsan"], groupPolicy: "mention" });
    expect(built.adapter.capabilities).toMatchObject({ streaming: "none", maxMessageLength: 2_000 });
    expect(Object.keys(built.quotas?.scopes ?? {})).toEqual(["member", "api"]);
    const robot = await wecomChannel.create(parse({ enabled: true, mode: "robot", robot: { botId: "aib1", secret: "s", name: "CountBot" } }), dependencies);
    expect(robot.webhook).toBeUndefined();
    expect(robot.adapter.capabilities.streaming).toBe("edit");
    expect(robot.annotateSends).toBe(true);
    expect(robot.account).not.toBe(built.account);
    expect(robot.inboundIdOf?.({ platformMessageId: "m1" } as never)).toBe("wecom-m1");
  });
});

describe("WeCom Markdown", () => {
  it("writes tables as lines, keeps what WeCom shows, and counts UTF-8 bytes", () => {
    expect(renderWeComMarkdown("| name | score |\n| --- | --- |\n| 张三 | 3 |").text).toBe("name | score\n张三 | 3");
    expect(renderWeComMarkdown("## Plan\n**bold** [link](https://example.com) `code`\n> quote").text).toBe("## Plan\n**bold** [link](https://example.com) `code`\n> quote");
    expect(renderWeComMarkdown("~~old~~ new ![chart](https://e.com/c.png)").text).toBe("old new [chart](https://e.com/c.png)");
    expect(renderWeComMarkdown("```\n| a | b |\n```").text).toBe("```\n| a | b |\n```");
    expect(wecomRenderedBytes("企业微信")).toBe(12);
  });
});

describe("WeCom robot frames", () => {
  const frame = (fields: object) => RobotFrameBodySchema.parse({ msgid: "m1", chattype: "group", chatid: "wrg1", from: { userid: "zhangsan" }, msgtype: "text", ...fields });

  it("counts a group message as addressed by the robot's @name, taken out of the text", () => {
    const addressed = toRobotEvent(frame({ text: { content: "@CountBot @分析团队 看看这家店" } }), "CountBot", 1);
    expect(addressed).toMatchObject({ chatId: "wrg1", chatType: "group", mentionsBot: true, text: "@分析团队 看看这家店", senderId: "zhangsan", eventId: "m1" });
    expect(toRobotEvent(frame({ text: { content: "just talking @CountBotter" } }), "CountBot", 1).mentionsBot).toBe(false);
    // Without a name configured, WeCom's delivery (only @-messages) is the mention.
    expect(toRobotEvent(frame({ text: { content: "hi" } }), undefined, 1).mentionsBot).toBe(true);
    const single = toRobotEvent(frame({ chattype: "single", chatid: undefined, text: { content: "hello" } }), "CountBot", 1);
    expect(single).toMatchObject({ chatId: "zhangsan", chatType: "private", mentionsBot: false, text: "hello" });
    expect(toRobotEvent(frame({ msgtype: "voice", voice: { content: "语音转写" } }), undefined, 1).text).toBe("[voice message] 语音转写");
  });
});
