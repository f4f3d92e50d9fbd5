/**
 * DingTalk end to end: the fake platform driven by the real Stream SDK inside gateway processes,
 * and a worker process, over real Redis, with a fake LLM. Replies stream into AI cards (the default),
 * so a reply shows as a card finished with its text, and what did not fit as Markdown messages after
 * it. Last, the same app in HTTP callback mode.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeDingTalkServer, type FakeUser, startFakeDingTalk } from "../support/fake-dingtalk-server.js";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const APP_KEY = "dingappkeye2e0001";
const APP_SECRET = "dingtalk-e2e-app-secret";
const owner: FakeUser = { staffId: "owner01", dingtalkId: "$:LWCP_v1:$owner000000001", nick: "Owner" };
const stranger: FakeUser = { staffId: "stranger09", dingtalkId: "$:LWCP_v1:$stranger00009", nick: "Stranger" };
const GROUP = "cidGroupE2E";

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let dingtalk: FakeDingTalkServer;
let env: Record<string, string>;
let gateway: ServiceProcess;
let worker: ServiceProcess;
/** When the model got each question, by its text. */
const askedAt = new Map<string, number>();

function lastUser(body: Record<string, unknown>): string {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = [...messages].reverse().find((message) => message.role === "user");
  if (typeof last?.content === "string") return last.content;
  return ((last?.content ?? []) as Array<{ type: string; text?: string }>).filter((part) => part.type === "text").map((part) => part.text).join(" ");
}

const longReply = () => Array.from({ length: 24 }, (_, index) => `Part ${index}. ${"A paragraph long enough to need several DingTalk messages. ".repeat(8)}`).join("\n\n");

function script(body: Record<string, unknown>): FakeOpenAIStep {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const role = /^You are (.+?), one agent/m.exec(String(messages[0]?.content ?? ""))?.[1];
  if (role) return { text: `${role} findings` };
  const text = lastUser(body);
  if (!askedAt.has(text)) askedAt.set(text, Date.now());
  if (text.startsWith("[Background event]")) return { text: `Background: ${text.replace("[Background event] ", "").split("\n<!--")[0]!.slice(0, 300)}` };
  if (text.includes("long reply")) return { text: longReply() };
  // A first streamed text, a tool call, then the rest: the card shows the first part before the answer is done.
  if (text.includes("stream please")) {
    if (messages.at(-1)?.role === "tool") return { text: ["and here ", "is the rest."], hangMs: 1_500 };
    return { text: "Looking around first. ", toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] };
  }
  if (text.includes("crash draft")) return { text: ["the draft shows ", "this text"], hangMs: 6_000 };
  return { text: `echo: ${text}` };
}

async function writeConfig(name: string, section: Record<string, unknown>): Promise<string> {
  const file = path.join(root, name);
  // Named as the seed design's users name teams: `@团队名称` in a DingTalk group.
  const teams = { 分析团队: { mode: "pipeline", agents: [{ id: "analyst", role: "Analyst", task: "analyse the goal" }] } };
  const dingtalkSection = { enabled: true, allowFrom: [owner.staffId], groupPolicy: "mention", rateLimitPerMinute: 100, aiCard: { settleMs: 1_500 }, ...section };
  await writeFile(file, JSON.stringify({ redis: { prefix, leaseTtlMs: 2_000 }, agent: { providerRetries: 0 }, teams, channels: { dingtalk: dingtalkSection } }));
  return file;
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-dingtalk-"));
  prefix = `countbot-dingtalk-${randomUUID()}`;
  redis = new Redis(redisUrl);
  dingtalk = await startFakeDingTalk({ appKey: APP_KEY, appSecret: APP_SECRET, redeliverAfterMs: 1_500 });
  llm = await startFakeOpenAI({ script });
  env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    COUNTBOT_CONFIG: await writeConfig("stream.json", {}),
    DINGTALK_CLIENT_ID: APP_KEY,
    DINGTALK_CLIENT_SECRET: APP_SECRET,
    DINGTALK_API_ROOT: dingtalk.origin,
    OPENAI_API_KEY: "sk-dingtalk-0123456789",
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
  await dingtalk?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Shown {
  seq: number;
  text: string;
  /** A card's flowStatus history; absent for a message. */
  statuses?: string[];
}

/** What the robot put into a chat (a staffId or a group's conversation id), cards and messages in order. */
function shownIn(target: string): Shown[] {
  const cards = dingtalk.cards.filter((card) => card.openSpaceId.endsWith(`.${target}`)).map((card) => ({ seq: card.seq, text: card.params.msgContent ?? "", statuses: card.statuses }));
  const messages = dingtalk.messages.filter((message) => message.target === target).map((message) => ({ seq: message.seq, text: message.text }));
  return [...cards, ...messages].sort((a, b) => a.seq - b.seq);
}

const finished = (shown: Shown) => shown.statuses === undefined || shown.statuses.at(-1) === "3";

async function shownWith(target: string, matches: (text: string) => boolean, what: string): Promise<Shown> {
  return dingtalk
    .waitFor(() => shownIn(target).find((shown) => matches(shown.text) && finished(shown)), { timeoutMs: 40_000, what })
    .catch((error: unknown) => {
      throw new Error(`${String(error)}\nshown: ${JSON.stringify(shownIn(target))}\n--- gateway ---\n${gateway.output().slice(-5_000)}\n--- worker ---\n${worker.output().slice(-3_000)}`);
    });
}

function say(input: { text: string; from?: FakeUser; group?: boolean; atRobot?: boolean }) {
  const message = dingtalk.message({
    sender: input.from ?? owner,
    text: input.text,
    ...(input.group ? { conversationType: "2" as const, conversationId: GROUP } : {}),
    ...(input.atRobot ? { atRobot: true } : {}),
  });
  return { message, pushed: dingtalk.push(message, { timeoutMs: 30_000 }) };
}

const modelSaw = (text: string) => llm.requests.some((request) => JSON.stringify(request.body).includes(text));

let sentinels = 0;

/**
 * Resolves with its answer's text once a later message of the owner's is answered: a chat's messages
 * are answered in order and its replies delivered in order, so anything still to come for the
 * earlier ones (a doubled reply, a late part, a second card) was shown before it.
 */
async function settle(): Promise<string> {
  const text = `settle ${++sentinels}`;
  say({ text });
  await shownWith(owner.staffId!, (shown) => shown === `echo: ${text}`, `the answer to ${text}`);
  return `echo: ${text}`;
}

/** What the robot showed the owner since `mark`, once settled, the settling answer left out. */
async function settledSince(mark: number): Promise<Shown[]> {
  const answer = await settle();
  return shownIn(owner.staffId!).slice(mark).filter((shown) => shown.text !== answer);
}

describe("DingTalk through gateway and worker processes: Stream mode", () => {
  it("answers a one-to-one message in the user's chat", async () => {
    const mark = shownIn(owner.staffId!).length;
    const { pushed } = say({ text: "hello bot" });
    expect((await pushed).deliveries).toBe(1);
    await shownWith(owner.staffId!, (text) => text === "echo: hello bot", "the DM reply");
    expect((await settledSince(mark)).map((shown) => shown.text)).toEqual(["echo: hello bot"]);
  });

  it("answers a group message that @mentions the robot and ignores one that does not", async () => {
    const quiet = say({ text: "humans talking", group: true });
    say({ text: "ping", group: true, atRobot: true });
    // A group's messages reach the model labelled with their speaker (the Groups section).
    const labelled = `echo: [Owner (dingtalk:${owner.staffId})] ping`;
    await shownWith(GROUP, (text) => text === labelled, "the group reply");
    await quiet.pushed;
    expect(modelSaw("humans talking")).toBe(false);
    expect(shownIn(GROUP).map((shown) => shown.text)).toEqual([labelled]);
  });

  it("gives a stranger a pairing code and never asks the model", async () => {
    say({ text: "let me in", from: stranger });
    const code = await shownWith(stranger.staffId!, (text) => text.includes("countbot pairing approve"), "the pairing code");
    expect(code.text).toContain(`Your dingtalk id is ${stranger.staffId}`);
    expect(dingtalk.messages.find((message) => message.target === stranger.staffId)?.msgKey).toBe("sampleText");
    expect(modelSaw("let me in")).toBe(false);
  });

  it("splits a long reply into messages DingTalk takes, in order", async () => {
    const mark = shownIn(owner.staffId!).length;
    say({ text: "give me the long reply" });
    await shownWith(owner.staffId!, (text) => text.includes("Part 23."), "the last part");
    const parts = await settledSince(mark);
    expect(parts.length).toBeGreaterThanOrEqual(3);
    for (const part of parts) expect(part.text.length).toBeLessThanOrEqual(4_000);
    const joined = parts.map((part) => part.text).join("\n\n");
    for (let index = 0; index < 24; index++) expect(joined).toContain(`Part ${index}. A paragraph`);
    expect(joined.indexOf("Part 0.")).toBeLessThan(joined.indexOf("Part 23."));
  });

  it("streams a reply into one AI card, updated in place and finished with the final text", async () => {
    const mark = dingtalk.cards.length;
    say({ text: "stream please" });
    const card = await dingtalk.waitFor(() => dingtalk.cards.slice(mark).find((candidate) => candidate.openSpaceId.endsWith(owner.staffId!)), { timeoutMs: 30_000, what: "the card" });
    expect(card.params.msgContent).toMatch(/^Looking around first\./);
    const final = await shownWith(owner.staffId!, (text) => text.includes("is the rest."), "the finished card");
    expect(final.statuses?.[0]).toBe("2");
    expect(final.statuses?.at(-1)).toBe("3");
    const updates = dingtalk.requests.filter((call) => (call.route === "cardStreaming" || call.route === "cardUpdate") && call.body.outTrackId === card.outTrackId);
    expect(updates.length).toBeGreaterThanOrEqual(2);
    expect(dingtalk.cards.slice(mark)).toHaveLength(1);
    expect(dingtalk.messages.filter((message) => message.text.includes("is the rest."))).toEqual([]);
  });

  it("answers a message DingTalk delivered again (its acknowledgement lost) once", async () => {
    const mark = shownIn(owner.staffId!).length;
    const lost = dingtalk.message({ sender: owner, text: "redelivered message" });
    expect((await dingtalk.push(lost, { ignoreAcks: 1, timeoutMs: 30_000 })).deliveries).toBe(2);
    await shownWith(owner.staffId!, (text) => text === "echo: redelivered message", "the reply");
    expect((await settledSince(mark)).filter((shown) => shown.text === "echo: redelivered message")).toHaveLength(1);
    expect(llm.requests.filter((request) => lastUser(request.body) === "redelivered message")).toHaveLength(1);
  });

  it("runs a team started with @团队名称 in a group and brings its result back into the group", { timeout: 90_000 }, async () => {
    say({ text: "@分析团队 看看这家店", group: true, atRobot: true });
    await shownWith(GROUP, (text) => text.startsWith("Team [分析团队] started"), "the started reply");
    const result = await shownWith(GROUP, (text) => text.startsWith("Background:"), "the team's result in the group");
    expect(result.text).toMatch(/Team \[分析团队\] \(run ID: wf-[0-9a-f]+\) completed/);
    expect(result.text).toContain("Analyst findings");
    expect(llm.requests.some((request) => JSON.stringify(request.body).includes("看看这家店"))).toBe(true);
  });

  it("finishes the card once when the gateway showing it is killed mid-reply and the standby takes over", { timeout: 90_000 }, async () => {
    const standby = startService(["gateway"], env);
    await standby.waitForLog(/standing for the leader lease/);
    const mark = dingtalk.cards.length;
    say({ text: "the crash draft" });
    const card = await dingtalk.waitFor(() => dingtalk.cards.slice(mark).find((candidate) => candidate.params.msgContent === "the draft shows this text"), { timeoutMs: 30_000, what: "the streamed card" });
    const recorded = async () => (await redis.keys(`{${prefix}}:draftmsg:dingtalk:*`)).length > 0;
    for (let attempt = 0; attempt < 200 && !(await recorded()); attempt++) await pause(50);
    expect(await recorded()).toBe(true);
    await gateway.stop("SIGKILL");
    gateway = standby;
    await gateway.waitForLog(/channel connected/, 40_000);
    await dingtalk.waitFor(() => card.statuses.at(-1) === "3" || undefined, { timeoutMs: 40_000, what: "the card finished by the standby" });
    const answer = await settle();
    expect(card.params.msgContent).toBe("the draft shows this text");
    expect(dingtalk.cards.slice(mark).filter((candidate) => candidate.params.msgContent !== answer)).toHaveLength(1);
    expect(dingtalk.messages.filter((message) => message.text === "the draft shows this text")).toEqual([]);
  });
});

describe("DingTalk through gateway and worker processes: HTTP callback mode", () => {
  let url: string;

  beforeAll(async () => {
    await gateway.stop();
    gateway = startService(["gateway"], { ...env, COUNTBOT_CONFIG: await writeConfig("http.json", { mode: "http" }) });
    const listening = await gateway.waitForLog(/gateway listening/, 40_000);
    await gateway.waitForLog(/channel connected/, 40_000);
    url = `${String(listening.url).replace(/\/$/, "")}/dingtalk/webhook`;
  }, 90_000);

  it("answers a signed callback and refuses a forged one without a model call", async () => {
    const forged = dingtalk.message({ sender: owner, text: "forged callback" });
    expect((await dingtalk.postCallback(url, forged, { secret: "guessed-secret" })).status).toBe(401);
    const message = dingtalk.message({ sender: owner, text: "through the callback" });
    expect((await dingtalk.postCallback(url, message)).status).toBe(200);
    await shownWith(owner.staffId!, (text) => text === "echo: through the callback", "the callback's reply");
    expect(modelSaw("forged callback")).toBe(false);
  });

  it("never logs the app secret", () => {
    for (const service of [gateway, worker]) expect(service.output()).not.toContain(APP_SECRET);
  });
});
