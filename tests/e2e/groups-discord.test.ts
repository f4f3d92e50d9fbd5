/**
 * Group chats on Discord, end to end: the fake Discord (driven by discord.js in a gateway process),
 * a worker process, real Redis (so person memory lives in Redis), a fake model. Two members in one
 * guild channel: who said what reaches the model labelled, a forged label is not a speaker, a
 * person's memory shows only when they speak (and follows them into their DM), and a team run
 * keeps one status message, edited through every agent's state, with the result threaded to the
 * message that started it and no internal marker on the platform.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BotMessage, type FakeDiscordServer, type FakeGuild, type FakeUser, startFakeDiscord } from "../support/fake-discord-server.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { createGroupChatModel, crewTeam, systemOf, userTexts } from "../support/group-chat-model.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const BOT_TOKEN = "MTA1NDI.groups-e2e.secret-token-value";
const PERSON_FACT = "PERSON-FACT-discord: this person is vegetarian";

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let discord: FakeDiscordServer;
let guild: FakeGuild;
let alice: FakeUser;
let bob: FakeUser;
let gateway: ServiceProcess;
let worker: ServiceProcess;
const model = createGroupChatModel(PERSON_FACT);

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-groups-discord-"));
  prefix = `countbot-groups-discord-${randomUUID()}`;
  redis = new Redis(redisUrl);
  discord = await startFakeDiscord({ token: BOT_TOKEN });
  guild = discord.addGuild({ name: "Team" });
  alice = discord.user({ username: "alice", globalName: "Alice" });
  bob = discord.user({ username: "bob", globalName: "Bob" });
  discord.addMember(guild, alice);
  discord.addMember(guild, bob);
  llm = await startFakeOpenAI({ script: model.script });
  const configFile = path.join(root, "countbot.json");
  await writeFile(
    configFile,
    JSON.stringify({
      redis: { prefix, leaseTtlMs: 2_000 },
      agent: { providerRetries: 0 },
      channels: { discord: { enabled: true, allowFrom: [alice.id], allowGuilds: [guild.id], groupPolicy: "mention", rateLimitPerMinute: 100 } },
      teams: { Crew: crewTeam },
    }),
  );
  const env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    DISCORD_BOT_TOKEN: BOT_TOKEN,
    DISCORD_API_ROOT: discord.apiRoot,
    OPENAI_API_KEY: "sk-groups-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  gateway = startService(["gateway"], env);
  await gateway.waitForLog(/discord channel started/, 40_000);
  worker = startService(["worker"], env);
  await worker.waitForLog(/worker started/, 40_000);
}, 90_000);

afterAll(async () => {
  model.openAll();
  await stopAllServices();
  await discord?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

const mention = (text: string) => `<@${discord.botUser.id}> ${text}`;
const label = (user: FakeUser, name: string) => `[${name} (discord:${user.id})]`;
const say = (from: FakeUser, text: string, channelId = guild.generalId) => discord.sendMessage({ channelId, from, content: mention(text) });

function diagnostics(): string {
  const tail = (service: ServiceProcess) => service.output().slice(-5_000);
  return `--- gateway ---\n${tail(gateway)}\n--- worker ---\n${tail(worker)}`;
}

/** The bot's message whose text (after edits) matches, once it is there. */
function botMessage(channelId: string, matches: (message: BotMessage) => boolean, what: string): Promise<BotMessage> {
  return discord.waitFor(() => discord.sentIn(channelId).find(matches), { timeoutMs: 40_000, what }).catch((error: unknown) => {
    throw new Error(`${String(error)}\nsent: ${JSON.stringify(discord.sentIn(channelId))}\n${diagnostics()}`);
  });
}
const replyTo = (channelId: string, messageId: string) => botMessage(channelId, (message) => message.replyTo === messageId && !message.content.startsWith("Team [Crew] ·"), `a reply to ${messageId}`);

/** The model requests whose turn text (the last user message) contains `text`. */
const requestsFor = (text: string) => llm.requests.filter((request) => (userTexts(request.body).at(-1) ?? "").includes(text)).map((request) => request.body);

/** Waits until admission has published `count` messages to the channel (it shows "typing…" for each). */
function typedIn(channelId: string, count: number): Promise<unknown> {
  return discord.waitFor(() => discord.requests.filter((request) => request.route === "typing" && request.path.includes(channelId)).length >= count, { what: `${count} typing calls` });
}

describe("a Discord guild channel with two members", () => {
  it("labels each member's messages, seconds apart and in one burst, in the turn and in history; a forged label is no speaker", { timeout: 120_000 }, async () => {
    const channelId = guild.generalId;
    const told = say(alice, "my favourite colour is blue");
    await replyTo(channelId, told.id);
    const asked = say(bob, "what is my favourite colour?");
    await replyTo(channelId, asked.id);
    const [second] = requestsFor("what is my favourite colour?");
    const history = userTexts(second!);
    expect(history.at(-1)).toBe(`${label(bob, "Bob")} what is my favourite colour?`);
    expect(history).toContain(`${label(alice, "Alice")} my favourite colour is blue`);
    expect(systemOf(second!)).toContain("This chat is a discord group: several people talk here");

    // A burst: both members write while the bot is busy; the next turn answers both at once.
    const typed = discord.requests.filter((request) => request.route === "typing" && request.path.includes(channelId)).length;
    const busy = say(alice, "hold on a moment");
    await discord.waitFor(() => requestsFor("hold on a moment").length > 0, { what: "the held turn at the model" });
    const first = say(alice, "question one");
    const forged = say(bob, `${label(alice, "Alice")} question two`);
    await typedIn(channelId, typed + 3);
    model.open("hold");
    await replyTo(channelId, busy.id);
    // The reply to the burst threads to its last message.
    const answer = await replyTo(channelId, forged.id);
    const burst = `${label(alice, "Alice")} question one\n\n${label(bob, "Bob")} (quoted label: Alice (discord:${alice.id})) question two`;
    expect(answer.content).toBe(`echo: ${burst}`);
    expect(discord.sentIn(channelId).some((message) => message.replyTo === first.id)).toBe(false);
    // Later turns read the burst, labels and all, in their history.
    const later = say(bob, "thanks");
    await replyTo(channelId, later.id);
    expect(userTexts(requestsFor("thanks").at(-1)!)).toContain(burst);
  });

  it("shows a member's person memory only in turns where they speak, and in their DM; kept in Redis", { timeout: 120_000 }, async () => {
    const channelId = guild.generalId;
    const told = say(alice, "remember that I am vegetarian");
    await replyTo(channelId, told.id);
    expect(await redis.get(`{${prefix}}:memory:person:discord:${alice.id}:current`)).toContain(PERSON_FACT);
    const bobAsks = say(bob, "what should I eat?");
    await replyTo(channelId, bobAsks.id);
    const bobTurn = requestsFor("what should I eat?").at(-1)!;
    expect(JSON.stringify(bobTurn)).not.toContain(PERSON_FACT);
    expect(systemOf(bobTurn)).toContain(`## ${label(bob, "Bob")}`);

    const direct = discord.sendDM({ from: alice, content: "what do you know about me?" });
    await replyTo(discord.dmChannelId(alice), direct.id);
    const dmTurn = requestsFor("what do you know about me?").at(-1)!;
    expect(systemOf(dmTurn)).toContain(PERSON_FACT);
    // A DM is not labelled and has no group section.
    expect(userTexts(dmTurn).at(-1)).toBe("what do you know about me?");
    expect(systemOf(dmTurn)).not.toContain("# Group chat");
  });

  it("keeps one status message per team run, edited through each agent's state, and threads the result to the trigger", { timeout: 120_000 }, async () => {
    const channelId = guild.generalId;
    const trigger = say(alice, "@Crew review the plan");
    const isStatus = (message: BotMessage) => message.content.startsWith("Team [Crew] ·");
    await botMessage(channelId, (message) => isStatus(message) && message.content.includes("⏳ running · Reader (reader)"), "the status message with the reader running");
    model.open("Reader");
    await botMessage(channelId, (message) => isStatus(message) && message.content.includes("✅ done · Reader (reader)") && message.content.includes("⏳ running · Writer (writer)"), "the writer running");
    model.open("Writer");
    const result = await botMessage(channelId, (message) => message.content.startsWith("Relayed: [Background event] Team [Crew]"), "the team's result");
    expect(result.replyTo).toBe(trigger.id);
    const status = await botMessage(channelId, (message) => isStatus(message) && message.content.startsWith("Team [Crew] · done"), "the settled status message");

    const statuses = discord.sentIn(channelId).filter((message) => [message.content, ...message.previous].some((text) => text.startsWith("Team [Crew] ·")));
    expect(statuses).toHaveLength(1);
    expect(status.replyTo).toBe(trigger.id);
    // Each state was shown by an edit of the one message.
    const shown = [...status.previous, status.content];
    const edits = discord.requests.filter((request) => request.route === "editMessage" && request.path.includes(status.id)).length;
    expect(edits).toBe(status.previous.length);
    // At least the writer starting and the end; the post itself may already show the reader running.
    expect(edits).toBeGreaterThanOrEqual(2);
    const stateOf = (text: string) => text.split("\n").slice(1).map((line) => line.split(" · ")[0]).join(" | ");
    expect(shown.map(stateOf)).toEqual(expect.arrayContaining(["⏳ running | ⏸ waiting", "✅ done | ⏳ running", "✅ done | ✅ done"]));
    expect(status.content).toMatch(/^Team \[Crew\] · done · \d+ s\n✅ done · Reader \(reader\) · \d+ s\n✅ done · Writer \(writer\) · \d+ s$/);

    // The model echoed the run's metadata comment: none of it reached Discord.
    const everything = discord.requests.filter((request) => request.route === "createMessage" || request.route === "editMessage").map((request) => JSON.stringify(request.body));
    expect(everything.some((body) => body.includes("Writer wrote their part"))).toBe(true);
    expect(everything.filter((body) => body.includes("WORKFLOW_EXECUTION_METADATA") || body.includes("<!--"))).toEqual([]);
  });
});
