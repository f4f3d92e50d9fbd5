import { createHash } from "node:crypto";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { DiscordConfigSchema } from "../../../channels/discord/config.js";
import { discordChannel } from "../../../channels/discord/plugin.js";
import { ConfigError } from "../../../src/errors.js";
import type { ChannelDependencies } from "../../../src/gateway/channel.js";

const dependencies: ChannelDependencies = {
  logger: pino({ level: "silent" }),
  dataDir: "/tmp/countbot-discord-plugin",
  bus: { broadcast: async () => undefined, onBroadcast: () => ({ close: async () => undefined }) } as unknown as ChannelDependencies["bus"],
};

describe("Discord plugin", () => {
  it("has defaults for everything but the token, and describes every field", () => {
    expect(DiscordConfigSchema.parse({})).toEqual({
      enabled: false,
      allowFrom: [],
      allowGuilds: [],
      allowChannels: [],
      allowRoles: [],
      groupPolicy: "mention",
      groupContext: "labelled",
      teamProgress: "status-message",
      threads: { inheritParent: false },
      rateLimitPerMinute: 10,
      maxImageBytes: 10 * 1024 * 1024,
      registerCommands: false,
    });
    for (const [field, schema] of Object.entries(DiscordConfigSchema.shape)) expect(schema.description, field).toBeTruthy();
    expect(discordChannel).toMatchObject({ name: "discord", environment: { DISCORD_BOT_TOKEN: "token", DISCORD_API_ROOT: "apiRoot" } });
  });

  it("refuses unknown fields and ids that are not snowflakes, naming the field", () => {
    const unknown = DiscordConfigSchema.safeParse({ enabled: true, allowUsers: ["1"] });
    expect(unknown.success).toBe(false);
    expect(JSON.stringify(unknown.error?.issues)).toContain("allowUsers");
    const badId = DiscordConfigSchema.safeParse({ allowGuilds: ["my-server"] });
    expect(badId.error?.issues[0]?.path).toEqual(["allowGuilds", 0]);
  });

  it("rejects with a ConfigError naming channels.discord.token when enabled without one", async () => {
    const config = DiscordConfigSchema.parse({ enabled: true });
    const error = await discordChannel.create(config, dependencies).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).path).toBe("channels.discord.token");
  });

  it("builds the adapter, an account named by a hash of the token, and an allowlist of ids and scopes", async () => {
    const token = "MTIz.secret-token.value";
    const config = DiscordConfigSchema.parse({ enabled: true, token, allowFrom: ["42"], allowGuilds: ["100"], allowChannels: ["200"], allowRoles: ["300"], groupPolicy: "all", rateLimitPerMinute: 5 });
    const channel = await discordChannel.create(config, dependencies);
    expect(channel.adapter.name).toBe("discord");
    expect(channel.adapter.capabilities).toMatchObject({ maxMessageLength: 2000, streaming: "edit" });
    expect(channel.adapter.render?.("**bold**")).toEqual({ text: "**bold**", format: "formatted" });
    expect(channel.account).toBe(createHash("sha256").update(token).digest("hex").slice(0, 16));
    expect(channel.account).not.toContain(token);
    expect(channel.policy).toEqual({ allowFrom: ["42", "guild:100", "channel:200", "role:300"], groupPolicy: "all", groupContext: "labelled", rateLimit: { messages: 5, perMs: 60_000 } });
  });
});
