/** The DingTalk plugin's config and create(), and its Markdown rendering. */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { dingtalkChannel } from "../../../channels/dingtalk/plugin.js";
import { dingtalkRenderedLength, renderDingTalkMarkdown, titleOf } from "../../../channels/dingtalk/render-markdown.js";
import { ConfigError } from "../../../src/errors.js";
import { APP_KEY } from "./dingtalk-support.js";

const dependencies = { logger: pino({ level: "silent" }), dataDir: "/tmp/countbot-dingtalk-plugin", bus: { broadcast: async () => undefined, onBroadcast: async () => ({ close: async () => undefined }), watchDrafts: async () => ({ close: async () => undefined }) } };
const parse = (input: unknown) => dingtalkChannel.configSchema.parse(input);

describe("DingTalk plugin", () => {
  it("documents every field, defaults to off, Stream mode, mention gating and the AI card", () => {
    const config = parse({});
    expect(config).toMatchObject({ enabled: false, mode: "stream", apiRoot: "https://api.dingtalk.com", groupPolicy: "mention", webhook: { path: "/dingtalk/webhook" }, aiCard: { enabled: true, contentKey: "msgContent" } });
    expect(dingtalkChannel.environment).toEqual({ DINGTALK_CLIENT_ID: "appKey", DINGTALK_CLIENT_SECRET: "appSecret", DINGTALK_API_ROOT: "apiRoot" });
    const shape = (dingtalkChannel.configSchema as unknown as { shape: Record<string, { description?: string }> }).shape;
    for (const [field, schema] of Object.entries(shape)) expect(schema.description, field).toBeTruthy();
    expect(() => parse({ unknownField: true })).toThrow();
    expect(() => parse({ mode: "webhook" })).toThrow();
  });

  it("names the missing field in its ConfigError", async () => {
    const failure = (input: object) => dingtalkChannel.create(parse({ enabled: true, ...input }), dependencies).then(() => undefined, (error: unknown) => error);
    expect(await failure({ appSecret: "s" })).toMatchObject({ path: "channels.dingtalk.appKey" });
    expect(await failure({ appKey: APP_KEY })).toMatchObject({ path: "channels.dingtalk.appSecret" });
    expect(await failure({ appKey: APP_KEY })).toBeInstanceOf(ConfigError);
  });

  it("builds the channel: account from the app key, senders and groups allowed, the callback route in HTTP mode only", async () => {
    const http = await dingtalkChannel.create(parse({ enabled: true, appKey: APP_KEY, appSecret: "s", mode: "http", allowFrom: ["alice01"], allowChats: ["cidGroupA"] }), dependencies);
    expect(http.account).toMatch(/^[0-9a-f]{16}$/);
    expect(http.account).not.toContain(APP_KEY);
    expect(http.policy).toMatchObject({ allowFrom: ["alice01", "cidGroupA"], groupPolicy: "mention", rateLimit: { messages: 10, perMs: 60_000 } });
    expect(http.webhook?.path).toBe("/dingtalk/webhook");
    expect(http.annotateSends).toBe(true);
    expect(http.adapter.capabilities.streaming).toBe("edit");
    expect(Object.keys(http.quotas?.scopes ?? {})).toEqual(["group", "messages", "cards"]);
    const tuned = await dingtalkChannel.create(parse({ enabled: true, appKey: APP_KEY, appSecret: "s", limits: { group: { limit: 10 } } }), dependencies);
    expect(tuned.quotas?.scopes.group).toMatchObject({ per: "group", limit: 10, windowMs: 60_000 });
    expect(() => parse({ limits: { grup: { limit: 1 } } })).toThrow();
    const stream = await dingtalkChannel.create(parse({ enabled: true, appKey: APP_KEY, appSecret: "s", aiCard: { enabled: false } }), dependencies);
    expect(stream.webhook).toBeUndefined();
    expect(stream.adapter.capabilities.streaming).toBe("none");
    expect(stream.inboundIdOf?.({ platformMessageId: "msgX" } as never)).toBe("dingtalk-msgX");
  });
});

describe("DingTalk Markdown", () => {
  const render = (markdown: string) => renderDingTalkMarkdown(markdown).text;

  it("keeps what DingTalk shows: headings, bold, italic, links, images, quotes, lists", () => {
    const source = "## Plan\n\n**bold** and *italic*, a [link](https://example.com) and ![chart](https://example.com/c.png)\n\n> quoted\n\n- one\n- two\n  1. nested";
    expect(render(source)).toBe("## Plan\n\n**bold** and *italic*, a [link](https://example.com) and ![chart](https://example.com/c.png)\n\n> quoted\n\n- one\n- two\n    1. nested");
    expect(renderDingTalkMarkdown(source).format).toBe("formatted");
  });

  it("marks line breaks, writes tables as lines and drops what DingTalk cannot show", () => {
    expect(render("line one\nline two")).toBe("line one  \nline two");
    expect(render("| name | score |\n| --- | --- |\n| Ann | 3 |\n| Bo | 5 |")).toBe("**name | score**  \nAnn | 3  \nBo | 5");
    expect(render("~~old~~ new")).toBe("old new");
    expect(render("[click](javascript:alert(1))")).toBe("click (javascript:alert(1))");
    expect(render("```js\nconst a = 1;\n```")).toBe("```js\nconst a = 1;\n```");
    expect(render("@Analysts review *this*")).toBe("@Analysts review *this*");
  });

  it("measures the rendered text and titles a message with its first words", () => {
    expect(dingtalkRenderedLength("a\nb")).toBe("a  \nb".length);
    expect(titleOf("## Quarterly **results** are in, and they look good overall")).toBe("Quarterly results a…");
    expect(titleOf("", "CountBot")).toBe("CountBot");
  });
});
