/**
 * Slack end to end: the fake Slack driven by the real SDK (@slack/web-api, @slack/socket-mode)
 * inside gateway processes, and a worker process, over real Redis, with a fake LLM. Socket Mode
 * first: DMs, channel mentions, threads, slash commands, redelivered envelopes, a streamed reply,
 * a team run. Last, the same app over the Events API's signed HTTP requests.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeSlackServer, type FakeSlackUser, type MessageInput, startFakeSlack } from "../support/fake-slack-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const BOT_TOKEN = "xoxb-e2e-1111-2222-bot-token-secret";
const APP_TOKEN = "xapp-1-A0E2E-3333-app-token-secret";
const SIGNING_SECRET = "slack-e2e-signing-secret-0123456789";
const CHANNEL = "C0E2EGENRL";

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let slack: FakeSlackServer;
let env: Record<string, string>;
let gateway: ServiceProcess;
let worker: ServiceProcess;
let owner: FakeSlackUser;
let stranger: FakeSlackUser;
const OWNER_DM = "D0E2EOWNER";
const STRANGER_DM = "D0E2ESTRAN";

function lastUser(body: Record<string, unknown>): string {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = [...messages].reverse().find((message) => message.role === "user");
  if (typeof last?.content === "string") return last.content;
  return ((last?.content ?? []) as Array<{ type: string; text?: string }>).filter((part) => part.type === "text").map((part) => part.text).join(" ");
}

const longReply = () => Array.from({ length: 16 }, (_, index) => `Part ${index}. ${"A paragraph long enough to need several Slack messages. ".repeat(8)}`).join("\n\n");

function script(body: Record<string, unknown>): FakeOpenAIStep {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const role = /^You are (.+?), one agent/m.exec(String(messages[0]?.content ?? ""))?.[1];
  if (role) return { text: `${role} findings` };
  const text = lastUser(body);
  if (text.startsWith("[Background event]")) return { text: `Background: ${text.replace("[Background event] ", "").split("\n<!--")[0]!.slice(0, 300)}` };
  if (text.includes("long reply")) return { text: longReply() };
  if (text.includes("stream please")) {
    if (messages.at(-1)?.role === "tool") return { text: ["and here ", "is the **rest**."], hangMs: 3_000 };
    return { text: "Looking around first. ", toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] };
  }
  return { text: `echo: ${text}` };
}

async function writeConfig(name: string, section: Record<string, unknown>): Promise<string> {
  const file = path.join(root, name);
  const teams = { Analysts: { mode: "pipeline", agents: [{ id: "analyst", role: "Analyst", task: "analyse the goal" }] } };
  const slackSection = { enabled: true, allowFrom: [owner.id], groupPolicy: "mention", rateLimitPerMinute: 100, ...section };
  await writeFile(file, JSON.stringify({ redis: { prefix, leaseTtlMs: 2_000 }, agent: { providerRetries: 0 }, teams, channels: { slack: slackSection } }));
  return file;
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-slack-"));
  prefix = `countbot-slack-${randomUUID()}`;
  redis = new Redis(redisUrl);
  slack = await startFakeSlack({ botToken: BOT_TOKEN, appToken: APP_TOKEN, signingSecret: SIGNING_SECRET, redeliverAfterMs: 1_500 });
  owner = slack.addUser({ id: "U0E2EOWNER", name: "owner", displayName: "Owner" });
  stranger = slack.addUser({ id: "U0E2ESTRAN", name: "stranger", displayName: "Stranger" });
  llm = await startFakeOpenAI({ script });
  env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    COUNTBOT_CONFIG: await writeConfig("socket.json", {}),
    SLACK_BOT_TOKEN: BOT_TOKEN,
    SLACK_APP_TOKEN: APP_TOKEN,
    SLACK_SIGNING_SECRET: SIGNING_SECRET,
    SLACK_API_URL: slack.apiUrl,
    OPENAI_API_KEY: "sk-slack-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  gateway = startService(["gateway"], env);
  await gateway.waitForLog(/channel connected/, 40_000);
  worker = startService(["worker"], env);
  await worker.waitForLog(/worker started/);
}, 90_000);

afterAll(async () => {
  await stopAllServices();
  await slack?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let sentinels = 0;

/**
 * What the bot showed in `channel` since `mark`, once a later message there is answered: a chat's
 * messages are answered in order and its replies delivered in order, so anything still to come for
 * the earlier ones (a doubled reply, a late part) is among them. The sentinel's answer is left out.
 * Sent over Socket Mode, or as a signed event to `events` when given.
 */
async function settledSince(channel: string, mark: number, events?: string): Promise<string[]> {
  const text = `settle ${++sentinels}`;
  const mention = channel !== OWNER_DM;
  if (events) await slack.postEvent(events, slack.message({ from: owner, channel, text }).callbacks[0]!);
  else await say({ channel, text, mention });
  const answer = await shownWith(channel, (shown) => shown === `echo: ${text}` || shown.endsWith(`] ${text}`), `the answer to ${text}`);
  return slack.shown(channel).slice(mark).filter((shown) => shown !== answer);
}

async function shownWith(channel: string, matches: (text: string) => boolean, what: string, threadTs?: string): Promise<string> {
  return slack.waitFor(() => slack.shown(channel, threadTs).find(matches), { timeoutMs: 40_000, what }).catch((error: unknown) => {
    throw new Error(`${String(error)}\nshown: ${JSON.stringify(slack.posts.slice(-10))}\n--- gateway ---\n${gateway.output().slice(-5_000)}\n--- worker ---\n${worker.output().slice(-3_000)}`);
  });
}

function say(input: Omit<MessageInput, "from"> & { from?: FakeSlackUser }, ignoreAcks = 0) {
  return slack.say({ from: owner, ...input }, { timeoutMs: 30_000, ignoreAcks });
}

const modelSaw = (text: string) => llm.requests.some((request) => JSON.stringify(request.body).includes(text));

describe("Slack through gateway and worker processes: Socket Mode", () => {
  it("answers a DM in the DM", async () => {
    const mark = slack.shown(OWNER_DM).length;
    const { deliveries } = await say({ channel: OWNER_DM, text: "hello bot" });
    expect(deliveries).toEqual([1]);
    await shownWith(OWNER_DM, (text) => text === "echo: hello bot", "the DM reply");
    expect(await settledSince(OWNER_DM, mark)).toEqual(["echo: hello bot"]);
  });

  it("answers a channel message that @mentions the bot once (message and app_mention), and ignores one that does not", async () => {
    const quiet = say({ channel: CHANNEL, text: "humans talking" });
    const asked = await say({ channel: CHANNEL, text: "ping", mention: true });
    // Slack sent it twice: as `message` and as `app_mention`.
    expect(asked.deliveries).toEqual([1, 1]);
    const labelled = `echo: [Owner (slack:${owner.id})] ping`;
    await shownWith(CHANNEL, (text) => text === labelled, "the channel reply");
    await quiet;
    expect(await settledSince(CHANNEL, 0)).toEqual([labelled]);
    expect(modelSaw("humans talking")).toBe(false);
    expect(llm.requests.filter((request) => lastUser(request.body).endsWith("] ping"))).toHaveLength(1);
  });

  it("answers in the thread that asked, a session of its own, and follows a thread it answered in without a mention", async () => {
    const parent = await say({ channel: CHANNEL, text: "a topic to discuss" });
    await say({ channel: CHANNEL, text: "thread question", threadTs: parent.ts, mention: true });
    const answer = await shownWith(CHANNEL, (text) => text.includes("] thread question"), "the thread reply", parent.ts);
    // The model was told what the thread started from, though that message never reached it.
    expect(answer).toContain('(This thread started from a message by Owner: "a topic to discuss")');
    expect(slack.shown(CHANNEL).some((text) => text.includes("thread question"))).toBe(false);
    await say({ channel: CHANNEL, text: "and a follow-up", threadTs: parent.ts });
    await shownWith(CHANNEL, (text) => text.endsWith("] and a follow-up"), "the follow-up's reply", parent.ts);
    const sessions = await redis.keys(`{${prefix}}:*slack:${CHANNEL}:${parent.ts}*`);
    expect(sessions.length).toBeGreaterThan(0);
  });

  it("gives a stranger a pairing code and never asks the model", async () => {
    await say({ channel: STRANGER_DM, text: "let me in", from: stranger });
    const code = await shownWith(STRANGER_DM, (text) => text.includes("countbot pairing approve"), "the pairing code");
    expect(code).toContain(`Your slack id is ${stranger.id}`);
    expect(modelSaw("let me in")).toBe(false);
  });

  it("answers an envelope Slack delivered again (its acknowledgement lost) once", async () => {
    const { deliveries } = await say({ channel: OWNER_DM, text: "redelivered message" }, 1);
    expect(deliveries).toEqual([2]);
    expect(slack.socket.sent.filter((sent) => sent.retryAttempt === 1).length).toBeGreaterThan(0);
    await shownWith(OWNER_DM, (text) => text === "echo: redelivered message", "the reply");
    const mark = slack.shown(OWNER_DM).indexOf("echo: redelivered message");
    expect((await settledSince(OWNER_DM, mark)).filter((text) => text === "echo: redelivered message")).toHaveLength(1);
    expect(llm.requests.filter((request) => lastUser(request.body) === "redelivered message")).toHaveLength(1);
  });

  it("downloads a shared image with the bot token and gives it to the model", async () => {
    const png = Buffer.from("89504e470d0a1a0a0000000d4948445200000001000000010806000000", "hex");
    const file = slack.addFile({ id: "F0E2EPNG01", name: "dot.png", mimetype: "image/png", bytes: png });
    await say({ channel: OWNER_DM, text: "what is in this picture", files: [file] });
    await shownWith(OWNER_DM, (text) => text === "echo: what is in this picture", "the reply about the picture");
    const request = llm.requests.find((entry) => lastUser(entry.body) === "what is in this picture");
    expect(JSON.stringify(request?.body)).toContain(`data:image/png;base64,${png.toString("base64")}`);
  });

  it("streams a reply by editing one message with chat.update, within Slack's limits", async () => {
    // The DM's budget (one message a second) free again after the last test's reply: the first draft may go out at once.
    await pause(1_500);
    const mark = slack.posts.length;
    await say({ channel: OWNER_DM, text: "stream please" });
    const post = await slack.waitFor(() => slack.posts.slice(mark).find((candidate) => candidate.channel === OWNER_DM), { timeoutMs: 30_000, what: "the streamed message" });
    await shownWith(OWNER_DM, (text) => text.includes("is the *rest*."), "the final text");
    expect(post.history[0]).toMatch(/^Looking around first\./);
    expect(post.history.length, JSON.stringify({ post, gateway: gateway.output().slice(-3_000) })).toBeGreaterThanOrEqual(2);
    expect(post.text).toContain("is the *rest*.");
    expect(slack.calls.filter((call) => call.method === "chat.update" && call.body.ts === post.ts).length).toBeGreaterThanOrEqual(1);
    expect(slack.posts.slice(mark).filter((candidate) => candidate.channel === OWNER_DM)).toHaveLength(1);
    expect(slack.rateLimited).toEqual([]);
  });

  it("splits a long reply into messages, in order", async () => {
    const mark = slack.shown(OWNER_DM).length;
    await say({ channel: OWNER_DM, text: "give me the long reply" });
    await shownWith(OWNER_DM, (text) => text.includes("Part 15."), "the last part");
    const parts = await settledSince(OWNER_DM, mark);
    expect(parts.length).toBeGreaterThanOrEqual(2);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(3_500);
    const joined = parts.join("\n\n");
    for (let index = 0; index < 16; index++) expect(joined).toContain(`Part ${index}. A paragraph`);
    expect(slack.rateLimited).toEqual([]);
  });

  it("takes /new, /stop and /team as slash commands", { timeout: 60_000 }, async () => {
    const fresh = await slack.push("slash_commands", slack.command({ from: owner, channel: OWNER_DM, command: "/new" }), { timeoutMs: 30_000 });
    expect(fresh.deliveries).toBe(1);
    await shownWith(OWNER_DM, (text) => /new (conversation|session)/i.test(text), "the /new answer");
    const stops = slack.shown(OWNER_DM).filter((text) => text === "Stopping.").length;
    await slack.push("slash_commands", slack.command({ from: owner, channel: OWNER_DM, command: "/stop" }), { timeoutMs: 30_000 });
    await slack.waitFor(() => slack.shown(OWNER_DM).filter((text) => text === "Stopping.").length === stops + 1, { timeoutMs: 30_000, what: "the /stop answer" });
    await slack.push("slash_commands", slack.command({ from: owner, channel: OWNER_DM, command: "/team" }), { timeoutMs: 30_000 });
    await shownWith(OWNER_DM, (text) => text.startsWith("Teams: Analysts"), "the team list");
  });

  it("runs a team started with @Team in a channel and brings its result back there", { timeout: 90_000 }, async () => {
    await say({ channel: CHANNEL, text: "@Analysts look at this shop", mention: true });
    await shownWith(CHANNEL, (text) => text.startsWith("Team [Analysts] started"), "the started reply");
    const result = await shownWith(CHANNEL, (text) => text.startsWith("Background:"), "the team's result in the channel");
    expect(result).toMatch(/Team \[Analysts\] \(run ID: wf-[0-9a-f]+\) completed/);
    expect(result).toContain("Analyst findings");
    expect(modelSaw("look at this shop")).toBe(true);
  });
});

describe("Slack through gateway and worker processes: Events API over HTTP", () => {
  let url: string;

  beforeAll(async () => {
    await gateway.stop();
    gateway = startService(["gateway"], { ...env, COUNTBOT_CONFIG: await writeConfig("http.json", { mode: "http" }) });
    const listening = await gateway.waitForLog(/gateway listening/, 40_000);
    await gateway.waitForLog(/channel connected/, 40_000);
    url = `${String(listening.url).replace(/\/$/, "")}/slack/events`;
  }, 90_000);

  it("answers the URL check, refuses a forged request before parsing it, and answers a signed event once despite Slack's retry", async () => {
    const check = await slack.postEvent(url, { type: "url_verification", token: "unused", challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" });
    expect(check.status).toBe(200);
    expect(JSON.parse(check.body)).toEqual({ challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" });
    const forged = slack.message({ from: owner, channel: OWNER_DM, text: "forged event" }).callbacks[0]!;
    expect((await slack.postEvent(url, forged, { secret: "guessed-secret" })).status).toBe(401);
    // Not even JSON: refused for its signature, not for its body.
    const garbage = await fetch(url, { method: "POST", headers: { "content-type": "application/json", "x-slack-signature": "v0=00", "x-slack-request-timestamp": String(Math.floor(Date.now() / 1000)) }, body: "{not json" });
    expect(garbage.status).toBe(401);
    const stale = slack.message({ from: owner, channel: OWNER_DM, text: "stale event" }).callbacks[0]!;
    expect((await slack.postEvent(url, stale, { timestamp: String(Math.floor(Date.now() / 1000) - 600) })).status).toBe(401);

    const event = slack.message({ from: owner, channel: OWNER_DM, text: "through the Events API" }).callbacks[0]!;
    expect((await slack.postEvent(url, event)).status).toBe(200);
    expect((await slack.postEvent(url, event, { retryNum: 1 })).status).toBe(200);
    await shownWith(OWNER_DM, (text) => text === "echo: through the Events API", "the event's reply");
    const mark = slack.shown(OWNER_DM).indexOf("echo: through the Events API");
    expect((await settledSince(OWNER_DM, mark, url)).filter((text) => text === "echo: through the Events API")).toHaveLength(1);
    expect(modelSaw("forged event")).toBe(false);
    expect(modelSaw("stale event")).toBe(false);
  });

  it("takes a signed slash command", async () => {
    const answer = await slack.postCommand(url, slack.command({ from: owner, channel: OWNER_DM, command: "/team" }));
    expect(answer.status).toBe(200);
    await slack.waitFor(() => slack.shown(OWNER_DM).filter((text) => text.startsWith("Teams: Analysts")).length >= 2, { timeoutMs: 30_000, what: "the second team list" });
  });

  it("never logs a token or the signing secret", () => {
    for (const service of [gateway, worker]) {
      for (const secret of [BOT_TOKEN, APP_TOKEN, SIGNING_SECRET]) expect(service.output()).not.toContain(secret);
    }
  });
});
