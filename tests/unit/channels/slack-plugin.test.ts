/** The Slack plugin's config and create(), its mrkdwn rendering, and its secrets masked. */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { slackChannel } from "../../../channels/slack/plugin.js";
import { escapeMrkdwn, renderSlackMrkdwn, slackRenderedLength } from "../../../channels/slack/render-mrkdwn.js";
import { maskSecrets } from "../../../src/config/mask.js";
import { ConfigError } from "../../../src/errors.js";

const dependencies = { logger: pino({ level: "silent" }), dataDir: "/tmp/countbot-slack-plugin", bus: { broadcast: async () => undefined, onBroadcast: async () => ({ close: async () => undefined }), watchDrafts: async () => ({ close: async () => undefined }) } };
const parse = (input: unknown) => slackChannel.configSchema.parse(input);
const BOT = "xoxb-1-2-plugin-test";
const APP = "xapp-1-A1-plugin-test";

describe("Slack plugin", () => {
  it("documents every field, defaults to off, Socket Mode and mention gating", () => {
    const config = parse({});
    expect(config).toMatchObject({ enabled: false, mode: "socket", apiUrl: "https://slack.com/api/", groupPolicy: "mention", webhook: { path: "/slack/events" }, threads: { inheritParent: true } });
    expect(slackChannel.environment).toEqual({ SLACK_BOT_TOKEN: "botToken", SLACK_APP_TOKEN: "appToken", SLACK_SIGNING_SECRET: "signingSecret", SLACK_API_URL: "apiUrl" });
    const shape = (slackChannel.configSchema as unknown as { shape: Record<string, { description?: string }> }).shape;
    for (const [field, schema] of Object.entries(shape)) expect(schema.description, field).toBeTruthy();
    expect(() => parse({ unknownField: true })).toThrow();
    expect(() => parse({ botToken: "xapp-wrong-kind" })).toThrow(/xoxb-/);
    expect(() => parse({ appToken: "xoxb-wrong-kind" })).toThrow(/xapp-/);
    expect(() => parse({ allowFrom: ["alice"] })).toThrow(/member id/);
    expect(() => parse({ allowChannels: ["general"] })).toThrow(/channel id/);
  });

  it("names the missing field in its ConfigError, for the mode that needs it", async () => {
    const failure = (input: object) => slackChannel.create(parse({ enabled: true, ...input }), dependencies).then(() => undefined, (error: unknown) => error);
    expect(await failure({ appToken: APP })).toMatchObject({ path: "channels.slack.botToken" });
    expect(await failure({ botToken: BOT })).toMatchObject({ path: "channels.slack.appToken" });
    expect(await failure({ botToken: BOT, mode: "http" })).toMatchObject({ path: "channels.slack.signingSecret" });
    expect(await failure({ botToken: BOT })).toBeInstanceOf(ConfigError);
  });

  it("builds the channel: account from the bot token, members and channels allowed, the Request URL in HTTP mode only", async () => {
    const http = await slackChannel.create(parse({ enabled: true, botToken: BOT, signingSecret: "s3cret", mode: "http", allowFrom: ["U0ALICE01"], allowChannels: ["C0GENERAL"] }), dependencies);
    expect(http.account).toMatch(/^[0-9a-f]{16}$/);
    expect(http.policy).toMatchObject({ allowFrom: ["U0ALICE01", "channel:C0GENERAL"], groupPolicy: "mention", groupContext: "labelled", rateLimit: { messages: 10, perMs: 60_000 } });
    expect(http.webhook?.path).toBe("/slack/events");
    expect(http.teamProgress).toBe("status-message");
    expect(http.adapter.capabilities).toMatchObject({ streaming: "edit", maxMessageLength: 3_500 });
    expect(Object.keys(http.quotas?.scopes ?? {})).toEqual(["channel", "updates", "workspace"]);
    expect(http.quotas?.platformChatOf?.("C0GENERAL:1700000000.000100")).toBe("C0GENERAL");
    const socket = await slackChannel.create(parse({ enabled: true, botToken: BOT, appToken: APP, limits: { updates: { limit: 3 } } }), dependencies);
    expect(socket.webhook).toBeUndefined();
    expect(socket.quotas?.scopes.updates).toMatchObject({ per: "account", limit: 3, windowMs: 6_000 });
    expect(socket.inboundIdOf?.({ eventId: "C1:1700000000.000100" } as never)).toBe("slack-C1:1700000000.000100");
    expect(() => parse({ limits: { update: { limit: 1 } } })).toThrow();
  });

  it("masks the three credentials wherever the config is printed", () => {
    const masked = maskSecrets({ channels: { slack: parse({ botToken: `${BOT}-abcd`, appToken: `${APP}-efgh`, signingSecret: "signing-secret-ijkl" }) } });
    expect(masked.channels.slack).toMatchObject({ botToken: "****abcd", appToken: "****efgh", signingSecret: "****ijkl" });
  });
});

describe("Slack mrkdwn", () => {
  const render = (markdown: string) => renderSlackMrkdwn(markdown).text;

  it("writes Markdown in Slack's syntax: bold, italic, strike-through, links, headings, lists", () => {
    expect(render("**bold**, *italic*, ~~old~~ and `code`")).toBe("*bold*, _italic_, ~old~ and `code`");
    expect(render("a [link](https://example.com/a?b=1) and <https://example.com>")).toBe("a <https://example.com/a?b=1|link> and <https://example.com>");
    expect(render("## Plan\n\n- one\n- two\n  1. nested\n- [x] done")).toBe("*Plan*\n\n• one\n• two\n    1. nested\n• ☑ done");
    expect(render("> quoted\n> text")).toBe("> quoted\n> text");
    expect(renderSlackMrkdwn("**x**").format).toBe("formatted");
  });

  it("escapes Slack's control characters, keeps code, writes tables as lines and refuses unsafe links", () => {
    expect(render("if a < b && c > d")).toBe("if a &lt; b &amp;&amp; c &gt; d");
    expect(render("<@U123> <!channel>")).not.toContain("<@U123>");
    expect(render("```ts\nconst a = x < 1;\n```")).toBe("```\nconst a = x &lt; 1;\n```");
    expect(render("| name | score |\n| --- | --- |\n| Ann | 3 |")).toBe("*name | score*\nAnn | 3");
    expect(render("[click](javascript:alert(1))")).toBe("click (javascript:alert(1))");
    expect(render("@Analysts review **this**")).toBe("@Analysts review *this*");
    expect(escapeMrkdwn("a<b>&")).toBe("a&lt;b&gt;&amp;");
  });

  it("measures the rendered text", () => {
    expect(slackRenderedLength("a < b")).toBe("a &lt; b".length);
  });
});
