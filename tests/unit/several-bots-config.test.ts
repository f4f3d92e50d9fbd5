/**
 * Several bots and agents in one config (issue 33): accounts per platform, agent profiles, routing
 * rules; what loading accepts, and the errors it names.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { channelPlugins } from "../../channels/index.js";
import { accountChannel, accountsOf, splitChannel } from "../../src/config/accounts.js";
import { routeProfile } from "../../src/config/agents.js";
import { loadConfig } from "../../src/config/load.js";
import { collectSecrets, maskSecrets } from "../../src/config/mask.js";
import { profileConfig } from "../../src/app/profiles.js";
import { ConfigError } from "../../src/errors.js";
import { pino } from "pino";
import { createChannels } from "../../src/app/gateway-accounts.js";
import { startHarness } from "../support/agent-harness.js";

let root: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "countbot-several-bots-"));
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

function load(content: Record<string, unknown>) {
  const file = join(root, "countbot.json");
  mkdirSync(root, { recursive: true });
  writeFileSync(file, JSON.stringify({ dataDir: join(root, "data"), ...content }));
  return loadConfig({ env: {}, cwd: root, homeDir: root, file, channels: channelPlugins });
}

function loadError(content: Record<string, unknown>): string {
  try {
    load(content);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error("the config loaded");
}

const twoBots = {
  telegram: {
    enabled: true,
    allowFrom: ["1"],
    accounts: [
      { id: "default", token: "111:aaa" },
      { id: "support", token: "222:bbb", allowFrom: ["2"] },
    ],
  },
};

describe("accounts", () => {
  it("gives each account the section's fields with its own over them, under a channel of its own", () => {
    const config = load({ channels: twoBots });
    const accounts = accountsOf("telegram", config.channels.telegram as Record<string, unknown>);
    expect(accounts.map((account) => [account.id, account.channel, account.section.token, account.section.allowFrom])).toEqual([
      ["default", "telegram", "111:aaa", ["1"]],
      ["support", "telegram.support", "222:bbb", ["2"]],
    ]);
    expect(splitChannel("telegram.support")).toEqual({ platform: "telegram", account: "support" });
    expect(splitChannel("telegram")).toEqual({ platform: "telegram", account: "default" });
    expect(accountChannel("discord", "default")).toBe("discord");
  });

  it("counts every account's credentials as secrets: masked in what is shown, redacted from logs", () => {
    const config = load({ channels: twoBots });
    expect(collectSecrets(config)).toEqual(expect.arrayContaining(["111:aaa", "222:bbb"]));
    const masked = maskSecrets(config).channels.telegram as { accounts: Array<{ token: string }> };
    expect(masked.accounts.map((account) => account.token)).toEqual(["****", "****"]);
  });

  it("names an account's bad field by its path, and refuses a second account with the same id", () => {
    const bad = loadError({ channels: { telegram: { enabled: true, accounts: [{ id: "a", token: "1:a", mode: "carrier-pigeon" }, { id: "a", token: "2:b" }] } } });
    expect(bad).toContain("channels.telegram.accounts[0].mode");
    expect(bad).toContain('channels.telegram.accounts[1].id: a second account "a"');
    expect(loadError({ channels: { telegram: { enabled: true, accounts: [{ id: "x", tokn: "1:a" }] } } })).toContain("channels.telegram.accounts[0]");
  });

  it("refuses accounts on the web channel, which has no platform account (its users sign in to the API)", () => {
    expect(loadError({ channels: { web: { accounts: [{ id: "x" }] } } })).toContain('channels.web: unknown field "accounts"');
  });

  it("refuses two accounts on one webhook path, and takes them on paths of their own", () => {
    const webhook = (secret: string, path?: string) => ({ mode: "webhook", webhook: { url: "https://bots.example/hook", secret, ...(path ? { path } : {}) } });
    const clash = loadError({ channels: { telegram: { enabled: true, accounts: [{ id: "a", token: "1:a", ...webhook("s1") }, { id: "b", token: "2:b", ...webhook("s2") }] } } });
    expect(clash).toMatch(/channels\.telegram\.accounts\[1\]\.webhook\.path: webhook path \/telegram\/webhook is channels\.telegram\.accounts\[0\]'s already/);
    const config = load({ channels: { telegram: { enabled: true, accounts: [{ id: "a", token: "1:a", ...webhook("s1", "/tg/a") }, { id: "b", token: "2:b", ...webhook("s2", "/tg/b") }] } } });
    expect(accountsOf("telegram", config.channels.telegram as Record<string, unknown>).map((account) => (account.section.webhook as { path: string }).path)).toEqual(["/tg/a", "/tg/b"]);
  });

  it("refuses an account of one platform on another platform's webhook path", () => {
    const message = loadError({
      channels: {
        telegram: { enabled: true, token: "1:a", mode: "webhook", webhook: { url: "https://bots.example/hook", secret: "s1", path: "/hooks" } },
        feishu: { enabled: true, appId: "cli_a", appSecret: "x", mode: "webhook", encryptKey: "k", verificationToken: "v", webhook: { path: "/hooks" } },
      },
    });
    expect(message).toContain("channels.feishu.webhook.path: webhook path /hooks is channels.telegram's already");
  });
});

describe("agent profiles and routing", () => {
  const profiles = {
    agents: {
      support: { persona: { name: "Helpdesk" }, model: "openai/support-model" },
      engineering: { model: "openai/eng-model", tools: ["read_file", "mcp_docs_*"], memory: { scope: "global" } },
    },
    routing: [
      { match: { channel: "telegram", account: "support" }, agent: "support" },
      { match: { channel: "discord", group: ["900"] }, agent: "engineering" },
      { match: { sender: "42" }, agent: "engineering" },
    ],
  };

  it("routes by channel, account, group (a thread by its parent) and sender; no match is `default`", () => {
    const { routing } = load(profiles);
    expect(routeProfile(routing, { channel: "telegram.support", chatId: "-100", senderId: "7", chatType: "group" })).toBe("support");
    expect(routeProfile(routing, { channel: "telegram", chatId: "-100", senderId: "7", chatType: "group" })).toBe("default");
    expect(routeProfile(routing, { channel: "discord", chatId: "thread-1", parentChatId: "900", senderId: "7", chatType: "thread" })).toBe("engineering");
    expect(routeProfile(routing, { channel: "discord", chatId: "900", senderId: "7", chatType: "private" })).toBe("default");
    expect(routeProfile(routing, { channel: "web", chatId: "x", senderId: "42" })).toBe("engineering");
    // A chat whose type is not known (a background event's) may be the group a rule names.
    expect(routeProfile(routing, { channel: "discord", chatId: "900" })).toBe("engineering");
  });

  it("gives each profile its config: persona, model, its own workspace under the data directory, memory scope", () => {
    const config = load(profiles);
    const support = profileConfig(config, "support");
    expect(support.agent.persona.name).toBe("Helpdesk");
    expect(support.agent.model).toBe("openai/support-model");
    expect(support.workspace).toBe(join(root, "data", "agents", "support", "workspace"));
    expect(profileConfig(config, "engineering").memory.scope).toBe("global");
    expect(profileConfig(config, "default")).toBe(config);
    expect(profileConfig(config, "default").workspace).toBe(join(root, "data", "workspace"));
  });

  it("refuses a rule naming an unknown profile, a rule never reached, an unknown MCP server", () => {
    const message = loadError({
      agents: { support: { mcpServers: ["nowhere"] } },
      routing: [
        { match: { channel: "telegram" }, agent: "suport" },
        { match: { channel: "telegram", account: "x" }, agent: "support" },
        { agent: "support" },
        { match: { sender: "1" }, agent: "default" },
      ],
    });
    expect(message).toContain('routing[0].agent: no agent profile "suport" (known: default, support)');
    expect(message).toContain("routing[1]: never reached: routing[0] comes first");
    expect(message).toContain("routing[3]: never reached: routing[2] comes first");
    expect(message).not.toContain("routing[2]: never");
    expect(message).toContain('agents.support.mcpServers[0]: no MCP server "nowhere"');
    const team = loadError({ teams: { Crew: { mode: "pipeline", agent: "nobody", agents: [{ id: "a", role: "A", task: "a" }] } } });
    expect(team).toContain('teams.Crew.agent: no agent profile "nobody" (known: default)');
  });

  it("refuses profiles whose workspaces are one or nest", () => {
    const nested = loadError({ workspace: join(root, "ws"), agents: { support: { workspace: join(root, "ws", "support") } } });
    expect(nested).toContain(`agents.support.workspace: ${join(root, "ws", "support")} overlaps profile "default"'s workspace ${join(root, "ws")}`);
    const shared = loadError({ agents: { a: { workspace: join(root, "same") }, b: { workspace: join(root, "same") } } });
    expect(shared).toContain('agents.b.workspace');
  });
});

describe("the README's worked example", () => {
  it("loads, and routes as the README says", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const section = readme.slice(readme.indexOf("## Several bots"));
    const example = /```json\n([\s\S]*?)\n```/.exec(section)?.[1];
    expect(example).toBeDefined();
    const file = join(root, "example.json");
    writeFileSync(file, example!);
    const env = { TELEGRAM_BOT_TOKEN: "111:aaa", TELEGRAM_SUPPORT_BOT_TOKEN: "222:bbb", DISCORD_BOT_TOKEN: "discord-token" };
    const config = loadConfig({ env, cwd: root, homeDir: root, file, channels: channelPlugins });
    expect(accountsOf("telegram", config.channels.telegram as Record<string, unknown>).map((account) => account.channel)).toEqual(["telegram", "telegram.support"]);
    expect(routeProfile(config.routing, { channel: "telegram.support", chatId: "5", chatType: "private" })).toBe("support");
    expect(routeProfile(config.routing, { channel: "discord", chatId: "5", chatType: "group" })).toBe("engineering");
    expect(routeProfile(config.routing, { channel: "telegram", chatId: "5", chatType: "private" })).toBe("default");
  });
});

describe("an account that cannot be built", () => {
  it("is named by its own path in the error", async () => {
    const config = load({ channels: { telegram: { enabled: true, accounts: [{ id: "default", token: "111:aaa" }, { id: "support" }] } } });
    const bus = { broadcast: async () => undefined, onBroadcast: async () => ({ close: async () => undefined }), watchDrafts: async () => ({ close: async () => undefined }) };
    const building = createChannels(config, pino({ level: "silent" }), bus, channelPlugins);
    await expect(building).rejects.toThrow("channels.telegram.accounts[1] is enabled but has no token: set TELEGRAM_BOT_TOKEN or channels.telegram.accounts[1].token");
    await expect(building).rejects.toMatchObject({ path: "channels.telegram.accounts[1].token" });
  });
});

describe("a profile that cannot be built", () => {
  it("stops the start with the profile's field named", async () => {
    const starting = startHarness(undefined, { config: { agents: { support: { model: "nosuch/model-x" } } }, env: { OPENAI_API_KEY: "sk-test-0123456789" } });
    await expect(starting).rejects.toThrow(/^agents\.support: Unknown provider "nosuch" in model "nosuch\/model-x"/);
    await expect(starting).rejects.toMatchObject({ path: "agents.support.model" });
  });
});
