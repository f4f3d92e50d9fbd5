/**
 * Several bots and agents in one deployment (issue 33), end to end: two Telegram bots (two fake Bot
 * API servers, driven by telegraf) and one Discord bot (the fake gateway and REST, driven by
 * discord.js), three agent profiles with their own personas and models (as the fake model server
 * sees them), routed by account and platform. Once in one process (`countbot start`, no Redis), once
 * as a gateway and two workers over Redis.
 *
 * - each chat reaches its profile;
 * - both Telegram bots sit in one group, and each answers only its own mentions;
 * - a fact remembered through one profile is in no prompt of another, though `memory.identities`
 *   makes the speaker one person on both bots;
 * - a file one profile's tools wrote is not readable by another's, by name or by its absolute path;
 * - a subagent inherits the profile of the chat that spawned it: its model, its workspace.
 */
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeDiscordServer, type FakeUser as DiscordUser, startFakeDiscord } from "../support/fake-discord-server.js";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeTelegramServer, type FakeUser, startFakeTelegram } from "../support/fake-telegram-server.js";
import { systemOf, textOf, userTexts } from "../support/group-chat-model.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runCli } from "../support/run-cli.js";
import { launchBrowser, loopbackContext } from "../support/browser.js";
import { signIn } from "../support/console-page.js";

const ALPHA_TOKEN = "7001:alpha-bot-secret-token";
const BETA_TOKEN = "7002:beta-bot-secret-token";
const DISCORD_TOKEN = "MTA1NDI.several-bots.secret-token-value";
const PERSON_FACT = "PERSON-FACT-several-bots: this person is vegetarian";
const SECRET = "TOP-SECRET-of-the-default-profile";
const GROUP = -100700;

type Message = { role: string; content: unknown };

/** The fake model: remembers, writes and reads files on request, repeats a tool's answer, echoes the rest with the model's name. */
function script(body: Record<string, unknown>): FakeOpenAIStep {
  const messages = body.messages as Message[];
  const last = messages.at(-1)!;
  if (last.role === "tool") return { text: `tool said: ${textOf(last)}` };
  const text = textOf([...messages].reverse().find((message) => message.role === "user"));
  if (text.includes("remember that I am vegetarian")) return { toolCalls: [{ name: "memory", arguments: JSON.stringify({ action: "append", scope: "person", content: PERSON_FACT }) }] };
  if (text.includes("spawn a helper")) return { toolCalls: [{ name: "spawn", arguments: JSON.stringify({ task: "write the support note", label: "note" }) }] };
  if (text.includes("write the support note")) return { toolCalls: [{ name: "write_file", arguments: JSON.stringify({ path: "note.txt", content: "written by a subagent" }) }] };
  if (text.includes("write the secret")) return { toolCalls: [{ name: "write_file", arguments: JSON.stringify({ path: "secret.txt", content: SECRET }) }] };
  const read = /read the file (\S+)/.exec(text);
  if (read) return { toolCalls: [{ name: "read_file", arguments: JSON.stringify({ path: read[1] }) }] };
  return { text: `echo from ${String(body.model)}: ${text}` };
}

/** The parts of the written config a test changes. */
interface DeployedConfig {
  agents: Record<string, unknown>;
  routing: unknown[];
  channels: { telegram: { accounts: unknown[] } & Record<string, unknown> } & Record<string, unknown>;
}

interface Deployment {
  root: string;
  alpha: FakeTelegramServer;
  beta: FakeTelegramServer;
  discord: FakeDiscordServer;
  llm: FakeOpenAIServer;
  alice: FakeUser;
  dave: DiscordUser;
  services: ServiceProcess[];
  env: Record<string, string>;
  /** The config as written to `configFile`: a test rewrites it and asks for a reload. */
  config: DeployedConfig;
  configFile: string;
  /** The API of the process serving the channels: base URL. */
  api: string;
  close(): Promise<void>;
}

async function deploy(mode: "one process" | "redis"): Promise<Deployment> {
  const root = await mkdtemp(path.join(tmpdir(), "countbot-several-bots-"));
  const alpha = await startFakeTelegram({ token: ALPHA_TOKEN, bot: { username: "AlphaBot", first_name: "Alpha" } });
  const beta = await startFakeTelegram({ token: BETA_TOKEN, bot: { username: "BetaBot", first_name: "Beta" } });
  const discord = await startFakeDiscord({ token: DISCORD_TOKEN });
  const llm = await startFakeOpenAI({ script });
  const alice = alpha.user({ id: 501, first_name: "Alice", username: "alice" });
  beta.user({ ...alice });
  for (const bot of [alpha, beta]) bot.addChat({ id: GROUP, type: "supergroup", title: "Both bots" });
  const dave = discord.user({ username: "dave", globalName: "Dave" });
  const prefix = `countbot-several-bots-${randomUUID()}`;
  const configFile = path.join(root, "countbot.json");
  const config: DeployedConfig & Record<string, unknown> = {
      ...(mode === "redis" ? { redis: { prefix, leaseTtlMs: 2_000 } } : {}),
      agent: { providerRetries: 0, model: "openai/model-general", persona: { name: "Generalist" } },
      agents: {
        support: { persona: { name: "Helpdesk" }, model: "openai/model-support" },
        engineering: { persona: { name: "Engineer" }, model: "openai/model-engineering" },
      },
      routing: [
        { match: { channel: "telegram", account: "support" }, agent: "support" },
        { match: { channel: "discord" }, agent: "engineering" },
      ],
      memory: { identities: { alice: ["telegram:501", "telegram.support:501"] } },
      channels: {
        telegram: {
          enabled: true,
          allowFrom: [String(alice.id)],
          groupPolicy: "mention",
          rateLimitPerMinute: 100,
          accounts: [
            { id: "default", token: ALPHA_TOKEN, apiRoot: alpha.apiRoot },
            { id: "support", token: BETA_TOKEN, apiRoot: beta.apiRoot },
          ],
        },
        discord: { enabled: true, token: DISCORD_TOKEN, apiRoot: discord.apiRoot, allowFrom: [dave.id], rateLimitPerMinute: 100 },
      },
  };
  await writeFile(configFile, JSON.stringify(config));
  const env = {
    HOME: root,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    OPENAI_API_KEY: "sk-several-bots-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
    ...(mode === "redis" ? { REDIS_URL: redisUrl } : {}),
  };
  const gateway = startService([mode === "redis" ? "gateway" : "start"], env);
  const services = [gateway];
  const listening = await gateway.waitForLog(mode === "redis" ? /gateway listening/ : /countbot started/, 60_000);
  if (mode === "redis") {
    for (let started = 0; started < 2; started += 1) {
      const worker = startService(["worker"], env);
      services.push(worker);
      await worker.waitForLog(/worker started/, 60_000);
    }
  }
  // Three platform accounts, each connected on its own, under its own channel name.
  const connected = () => new Set(gateway.output().split("\n").filter((line) => line.includes('"msg":"channel connected"')).map((line) => (JSON.parse(line) as { channel: string }).channel));
  await alpha.waitFor(() => ["telegram", "telegram.support", "discord"].every((channel) => connected().has(channel)), { timeoutMs: 60_000, what: `the three accounts connected:\n${gateway.output()}` });
  return {
    root,
    alpha,
    beta,
    discord,
    llm,
    alice,
    dave,
    services,
    env,
    config,
    configFile,
    api: String(listening.url),
    async close() {
      await stopAllServices();
      await Promise.all([alpha.close(), beta.close(), discord.close(), llm.close()]);
      if (mode === "redis") {
        const redis = new Redis(redisUrl);
        await deleteKeys(redis, prefix);
        await redis.quit();
      }
      await rm(root, { recursive: true, force: true });
    },
  };
}

describe.each(["one process", "redis"] as const)("several bots and agent profiles (%s)", (mode) => {
  let deployment: Deployment;

  beforeAll(async () => {
    deployment = await deploy(mode);
  }, 120_000);

  afterAll(async () => {
    await deployment?.close();
  });

  const requestsFor = (text: string) => deployment.llm.requests.filter((request) => (userTexts(request.body).at(-1) ?? "").includes(text)).map((request) => request.body);
  /** The final a Telegram bot sent to `chatId` whose text includes `text`. */
  const finalIn = (bot: FakeTelegramServer, chatId: number, text: string) =>
    bot.waitFor(() => bot.sent.find((item) => item.method === "sendMessage" && item.chatId === chatId && (item.text ?? "").includes(text)), {
      timeoutMs: 40_000,
      what: `a reply holding "${text}" in ${chatId}: ${JSON.stringify(bot.sent.filter((item) => item.method === "sendMessage").map((item) => item.text))}\n${deployment.services.map((service) => service.output().slice(-3_000)).join("\n")}`,
    });
  const dm = (bot: FakeTelegramServer, text: string) => bot.sendText({ chatId: deployment.alice.id, from: deployment.alice, text });

  it("sends each chat to its profile: its persona and its model", { timeout: 120_000 }, async () => {
    const { alpha, beta, discord, dave } = deployment;
    dm(alpha, "hello alpha");
    dm(beta, "hello beta");
    discord.sendDM({ from: dave, content: "hello discord" });
    await finalIn(alpha, deployment.alice.id, "echo from model-general: hello alpha");
    await finalIn(beta, deployment.alice.id, "echo from model-support: hello beta");
    await discord.waitFor(() => discord.sentIn(discord.dmChannelId(dave)).find((message) => message.content.includes("echo from model-engineering: hello discord")), { timeoutMs: 40_000, what: "the Discord reply" });
    expect(systemOf(requestsFor("hello alpha")[0]!)).toContain("Generalist");
    expect(systemOf(requestsFor("hello beta")[0]!)).toContain("Helpdesk");
    expect(systemOf(requestsFor("hello discord")[0]!)).toContain("Engineer");
    expect(systemOf(requestsFor("hello beta")[0]!)).not.toContain("Generalist");
  });

  it("has both Telegram bots in one group answer only their own mentions, as two sessions", { timeout: 120_000 }, async () => {
    const { alpha, beta, alice } = deployment;
    // Both bots see every message of the group (privacy mode off), as Telegram delivers them.
    const say = (text: string) => {
      for (const bot of [alpha, beta]) bot.sendText({ chatId: GROUP, from: alice, text });
    };
    say("@AlphaBot first question");
    say("@BetaBot second question");
    await finalIn(alpha, GROUP, "first question");
    await finalIn(beta, GROUP, "second question");
    // Each bot's lane is in order: its answer to the later message means it judged the earlier one.
    const groupFinals = (bot: FakeTelegramServer) => bot.sent.filter((item) => item.method === "sendMessage" && item.chatId === GROUP).map((item) => item.text);
    expect(groupFinals(alpha)).toEqual(["echo from model-general: [Alice (telegram:501)] first question"]);
    expect(groupFinals(beta)).toEqual(["echo from model-support: [Alice (telegram.support:501)] second question"]);
    // Two sessions: the support bot's turn did not see the other bot's exchange.
    expect(JSON.stringify(requestsFor("second question")[0])).not.toContain("first question");
  });

  it("keeps a fact remembered through one profile out of every prompt of another, for the same person", { timeout: 120_000 }, async () => {
    const { alpha, beta } = deployment;
    dm(alpha, "remember that I am vegetarian");
    await finalIn(alpha, deployment.alice.id, "tool said:");
    dm(alpha, "what do you know about me?");
    await finalIn(alpha, deployment.alice.id, "echo from model-general: what do you know about me?");
    // The control: the same profile has it in its prompt.
    expect(systemOf(requestsFor("what do you know about me?")[0]!)).toContain(PERSON_FACT);
    dm(beta, "and what do you know about me?");
    await finalIn(beta, deployment.alice.id, "echo from model-support: and what do you know about me?");
    for (const request of requestsFor("and what do you know about me?")) expect(JSON.stringify(request)).not.toContain(PERSON_FACT);
  });

  it("keeps a file one profile's tools wrote unreadable by another's, by name and by absolute path", { timeout: 120_000 }, async () => {
    const { alpha, beta, root } = deployment;
    dm(alpha, "write the secret");
    await finalIn(alpha, deployment.alice.id, "tool said: Wrote");
    dm(alpha, "read the file secret.txt");
    await finalIn(alpha, deployment.alice.id, SECRET);
    dm(beta, "read the file secret.txt please");
    const byName = await finalIn(beta, deployment.alice.id, "tool said:");
    const absolute = path.join(root, "data", "workspace", "secret.txt");
    dm(beta, `read the file ${absolute}`);
    const byPath = await beta.waitFor(() => beta.sent.filter((item) => item.method === "sendMessage" && (item.text ?? "").includes("tool said:"))[1], { timeoutMs: 40_000, what: "the second read's answer" });
    for (const reply of [byName, byPath]) {
      expect(reply.text).not.toContain(SECRET);
      expect(reply.text).toMatch(/error|not found|outside|no such/i);
    }
  });

  it("runs a subagent as the profile of the chat that spawned it: its model, its workspace", { timeout: 120_000 }, async () => {
    const { beta, root, llm } = deployment;
    dm(beta, "spawn a helper");
    await finalIn(beta, deployment.alice.id, "tool said: Subagent [note] started");
    const own = path.join(root, "data", "agents", "support", "workspace", "note.txt");
    await beta.waitFor(() => existsSync(own), { timeoutMs: 40_000, what: `the subagent's file at ${own}` });
    expect(existsSync(path.join(root, "data", "workspace", "note.txt"))).toBe(false);
    const subagentCalls = llm.requests.filter((request) => (userTexts(request.body).at(-1) ?? "").includes("write the support note"));
    // Its first call (the write) and the one after the tool's answer: both on the support profile's model.
    expect(subagentCalls.map((request) => request.body.model)).toEqual(["model-support", "model-support"]);
  });

  it("shows each account and profile to the operator: status, and /metrics by account and profile", { timeout: 120_000 }, async () => {
    const { env, api, root, beta } = deployment;
    dm(beta, "counted once more");
    await finalIn(beta, deployment.alice.id, "counted once more");
    const status = await runCli(["status"], { env, timeoutMs: 60_000 });
    expect(status.stdout).toContain("accounts: telegram (default, support)");
    expect(status.stdout).toContain("agent profiles (3):");
    expect(status.stdout).toMatch(/ {2}support +openai\/model-support {2}workspace \S+agents\/support\/workspace {2}from: routing\[0\] \(channel telegram, account support\)/);
    expect(status.stdout).toMatch(/ {2}default +openai\/model-general .* from: every message no rule takes/);
    const token = (await readFile(path.join(root, "data", "api-token"), "utf8")).trim();
    const metrics = await (await fetch(`${api}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text();
    expect(metrics).toMatch(/countbot_messages_in_total\{[^}]*channel="telegram",account="support",outcome="published"[^}]*\} [1-9]/);
    expect(metrics).toMatch(/countbot_channel_up\{[^}]*channel="telegram",account="support"[^}]*\} 1/);
    expect(metrics).toMatch(/countbot_channel_up\{[^}]*channel="discord",account="default"[^}]*\} 1/);
    // Turns are counted where they run: in this process when it is the one; in the workers otherwise.
    if (mode === "one process") expect(metrics).toMatch(/countbot_turn_duration_seconds_count\{[^}]*outcome="answered",profile="support"[^}]*\} [1-9]/);
  });

  it("lists each chat with its account and agent in the console's Sessions view, filtered by agent", { timeout: 120_000 }, async () => {
    const { api, root } = deployment;
    const token = (await readFile(path.join(root, "data", "api-token"), "utf8")).trim();
    const browser = await launchBrowser();
    try {
      const { context, refused } = await loopbackContext(browser);
      const page = await context.newPage();
      await signIn(page, api, token, "sessions");
      const support = page.getByRole("region", { name: "telegram.support chats" });
      await support.getByText("agent support", { exact: false }).first().waitFor();
      await page.getByLabel("Agent").selectOption("support");
      await page.getByRole("region", { name: "discord chats" }).waitFor({ state: "detached" });
      expect(await page.locator("li[data-profile]").evaluateAll((items) => items.map((item) => item.getAttribute("data-profile")))).toEqual(expect.arrayContaining(["support"]));
      expect(new Set(await page.locator("li[data-profile]").evaluateAll((items) => items.map((item) => item.getAttribute("data-profile"))))).toEqual(new Set(["support"]));
      expect(refused).toEqual([]);
    } finally {
      await browser.close();
    }
  });

  it("adds an account and a profile by a config reload, and removes them again, without touching the other accounts", { timeout: 120_000 }, async () => {
    const { config, configFile, api, root, alice, services } = deployment;
    const gateway = services[0]!;
    const token = (await readFile(path.join(root, "data", "api-token"), "utf8")).trim();
    const reload = async () => {
      const answer = await fetch(`${api}/api/config/reload`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
      expect(answer.status).toBe(200);
    };
    const connections = (channel: string) => gateway.output().split("\n").filter((line) => line.includes('"msg":"channel connected"') && line.includes(`"channel":"${channel}"`)).length;
    const gamma = await startFakeTelegram({ token: "7003:gamma-bot-secret-token", bot: { username: "GammaBot", first_name: "Gamma" } });
    try {
      gamma.user({ ...alice });
      const before = { telegram: connections("telegram"), support: connections("telegram.support") };
      config.agents.sales = { persona: { name: "Salesperson" }, model: "openai/model-sales" };
      config.routing.unshift({ match: { channel: "telegram", account: "sales" }, agent: "sales" });
      config.channels.telegram.accounts.push({ id: "sales", token: "7003:gamma-bot-secret-token", apiRoot: gamma.apiRoot });
      await writeFile(configFile, JSON.stringify(config));
      await reload();
      await gamma.waitFor(() => connections("telegram.sales") === 1, { timeoutMs: 40_000, what: "the added account connected" });
      // Over Redis the workers reload on the gateway's word, a moment later: until then the rules
      // they know send the account's chats to `default`. Ask until the new profile answers.
      let reply = "";
      for (let attempt = 0; attempt < 20 && !reply.startsWith("echo from model-sales"); attempt += 1) {
        const text = `hello sales ${attempt}`;
        gamma.sendText({ chatId: alice.id, from: alice, text });
        reply = (await finalIn(gamma, alice.id, text)).text ?? "";
      }
      expect(reply).toMatch(/^echo from model-sales: hello sales \d+$/);
      expect(systemOf(requestsFor(reply.slice("echo from model-sales: ".length))[0]!)).toContain("Salesperson");
      expect({ telegram: connections("telegram"), support: connections("telegram.support") }).toEqual(before);

      config.channels.telegram.accounts.pop();
      config.routing.shift();
      delete config.agents.sales;
      await writeFile(configFile, JSON.stringify(config));
      await reload();
      await gamma.waitFor(() => gateway.output().includes('"msg":"account removed by a config reload: stopped"'), { timeoutMs: 40_000, what: "the removed account stopped" });
      const ready = (await (await fetch(`${api}/ready`, { headers: { authorization: `Bearer ${token}` } })).json()) as { channels: Array<{ name: string }> };
      expect(ready.channels.map((channel) => channel.name).sort()).toEqual(["discord", "telegram", "telegram.support", "web"]);
      expect({ telegram: connections("telegram"), support: connections("telegram.support") }).toEqual(before);
    } finally {
      await gamma.close();
    }
  });

  it("applies an account's new allowlist in place, and reconnects it alone when its connection settings change", { timeout: 120_000 }, async () => {
    const { config, configFile, api, root, alice, services, beta } = deployment;
    const gateway = services[0]!;
    const token = (await readFile(path.join(root, "data", "api-token"), "utf8")).trim();
    const reload = async () => expect((await fetch(`${api}/api/config/reload`, { method: "POST", headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    const connections = (channel: string) => gateway.output().split("\n").filter((line) => line.includes('"msg":"channel connected"') && line.includes(`"channel":"${channel}"`)).length;
    const accounts = config.channels.telegram.accounts as Array<Record<string, unknown>>;
    const support = accounts.find((account) => account.id === "support")!;
    const before = { telegram: connections("telegram"), support: connections("telegram.support") };
    // The same bot behind another Bot API server (a self-hosted one, say): a new apiRoot.
    const moved = await startFakeTelegram({ token: BETA_TOKEN, bot: { username: "BetaBot", first_name: "Beta" } });
    try {
      moved.user({ ...alice });
      support.allowFrom = [String(alice.id), "424242"];
      await writeFile(configFile, JSON.stringify(config));
      await reload();
      support.apiRoot = moved.apiRoot;
      await writeFile(configFile, JSON.stringify(config));
      await reload();
      await moved.waitFor(() => gateway.output().includes('"msg":"account reconnected with new settings by a config reload"'), { timeoutMs: 40_000, what: "the support account reconnected" });
      // One reconnect for the two reloads: the allowlist alone reconnected nothing; the other bot was not touched.
      expect({ telegram: connections("telegram"), support: connections("telegram.support") }).toEqual({ telegram: before.telegram, support: before.support + 1 });
      // The bot's update ids go on where the old server left them (the runtime drops ids it has seen).
      moved.queueUpdate({ ...moved.textUpdate({ chatId: alice.id, from: alice, text: "hello from the moved bot" }), update_id: 900_000 });
      await finalIn(moved, alice.id, "echo from model-support: hello from the moved bot");
      expect(beta.sent.filter((item) => (item.text ?? "").includes("hello from the moved bot"))).toEqual([]);
    } finally {
      support.apiRoot = beta.apiRoot;
      support.allowFrom = undefined;
      await writeFile(configFile, JSON.stringify(config));
      await reload();
      await moved.close();
    }
  });
});
