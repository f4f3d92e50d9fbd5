/**
 * WeCom end to end, the self-built application: the fake WeCom server encrypts and signs callbacks
 * with its own implementation of WeCom's crypto and serves gettoken, message/send and media/get;
 * gateway processes and a worker process run over real Redis with a fake LLM.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeWeComServer, startFakeWeCom } from "../support/fake-wecom-server.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { newEncodingAESKey } from "../support/wecom-callback-crypto.js";

const CORP_ID = "ww00e2e0000000001";
const AGENT_ID = "1000002";
const SECRET = "wecom-e2e-application-secret";
const TOKEN = "wecomE2eCallbackToken";
const AES_KEY = newEncodingAESKey();
const OWNER = "zhangsan";
const STRANGER = "lisi";

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let wecom: FakeWeComServer;
let env: Record<string, string>;
let gateway: ServiceProcess;
let worker: ServiceProcess;
let callbackUrl: string;

function lastUser(body: Record<string, unknown>): string {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = [...messages].reverse().find((message) => message.role === "user");
  if (typeof last?.content === "string") return last.content;
  return ((last?.content ?? []) as Array<{ type: string; text?: string }>).filter((part) => part.type === "text").map((part) => part.text).join(" ");
}

const longReply = () => Array.from({ length: 12 }, (_, index) => `第${index}部分。${"企业微信的消息按字节计算长度。".repeat(12)}`).join("\n\n");

function script(body: Record<string, unknown>): FakeOpenAIStep {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const role = /^You are (.+?), one agent/m.exec(String(messages[0]?.content ?? ""))?.[1];
  if (role) return { text: `${role} findings` };
  const text = lastUser(body);
  if (text.startsWith("[Background event]")) return { text: `Background: ${text.replace("[Background event] ", "").split("\n<!--")[0]!.slice(0, 300)}` };
  if (text.includes("long reply")) return { text: longReply() };
  return { text: `echo: ${text}` };
}

async function listening(service: ServiceProcess): Promise<string> {
  const record = await service.waitForLog(/gateway listening/, 40_000);
  return `${String(record.url).replace(/\/$/, "")}/wecom/callback`;
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-wecom-"));
  prefix = `countbot-wecom-${randomUUID()}`;
  redis = new Redis(redisUrl);
  wecom = await startFakeWeCom({ corpId: CORP_ID, agentId: AGENT_ID, secret: SECRET, token: TOKEN, encodingAESKey: AES_KEY });
  llm = await startFakeOpenAI({ script });
  const config = path.join(root, "config.json");
  const teams = { 分析团队: { mode: "pipeline", agents: [{ id: "analyst", role: "Analyst", task: "analyse the goal" }] } };
  const section = { enabled: true, allowFrom: [OWNER], rateLimitPerMinute: 100, maxFileBytes: 1_000 };
  await writeFile(config, JSON.stringify({ redis: { prefix, leaseTtlMs: 2_000 }, agent: { providerRetries: 0 }, teams, channels: { wecom: section } }));
  env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    COUNTBOT_CONFIG: config,
    WECOM_CORP_ID: CORP_ID,
    WECOM_AGENT_ID: AGENT_ID,
    WECOM_SECRET: SECRET,
    WECOM_TOKEN: TOKEN,
    WECOM_ENCODING_AES_KEY: AES_KEY,
    WECOM_API_ROOT: wecom.origin,
    OPENAI_API_KEY: "sk-wecom-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  gateway = startService(["gateway"], env);
  callbackUrl = await listening(gateway);
  await gateway.waitForLog(/wecom channel started/, 40_000);
  worker = startService(["worker"], env);
  await worker.waitForLog(/worker started/);
}, 90_000);

afterAll(async () => {
  await stopAllServices();
  await wecom?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

let sentinels = 0;

/** Resolves once a later message of the owner's is answered: a doubled answer to an earlier one would have come first (per-chat order). */
async function settle(): Promise<void> {
  const text = `settle ${++sentinels}`;
  await say(text);
  await replyTo(OWNER, (content) => content === `echo: ${text}`, `the answer to ${text}`);
}
const sentTo = (user: string) => wecom.messages.filter((message) => message.target === user);
const modelSaw = (text: string) => llm.requests.some((request) => JSON.stringify(request.body).includes(text));

async function replyTo(user: string, matches: (text: string) => boolean, what: string) {
  return wecom.waitFor(() => sentTo(user).find((message) => matches(message.content)), { timeoutMs: 40_000, what }).catch((error: unknown) => {
    throw new Error(`${String(error)}\nsent: ${JSON.stringify(sentTo(user))}\n--- gateway ---\n${gateway.output().slice(-5_000)}\n--- worker ---\n${worker.output().slice(-3_000)}`);
  });
}

async function say(text: string, from = OWNER) {
  const { xml, msgId } = wecom.appMessage({ from, text });
  const answer = await wecom.postCallback(callbackUrl, xml);
  return { answer, msgId, xml };
}

describe("WeCom self-built application through gateway and worker processes", () => {
  it("answers the URL verification with the echostr, and refuses one signed with another token", async () => {
    const verified = await wecom.verifyUrl(callbackUrl);
    expect(verified.status).toBe(200);
    expect(verified.body).toBe(verified.expected);
    expect((await wecom.verifyUrl(callbackUrl, { token: "guessed" })).status).toBe(401);
  });

  it("answers a one-to-one message through the message API, the callback answered empty at once", async () => {
    const { answer } = await say("hello wecom");
    expect(answer).toMatchObject({ status: 200, body: "" });
    const reply = await replyTo(OWNER, (text) => text === "echo: hello wecom", "the reply");
    expect(reply.msgtype).toBe("markdown");
    expect(wecom.requests.find((call) => call.route === "/cgi-bin/message/send")?.body).toMatchObject({ touser: OWNER, agentid: Number(AGENT_ID) });
  });

  it("answers a message WeCom delivered three times (same MsgId) once", async () => {
    const { xml } = wecom.appMessage({ from: OWNER, text: "delivered thrice" });
    const answers = await Promise.all([wecom.postCallback(callbackUrl, xml), wecom.postCallback(callbackUrl, xml)]);
    answers.push(await wecom.postCallback(callbackUrl, xml));
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
    await replyTo(OWNER, (text) => text === "echo: delivered thrice", "the reply");
    await settle();
    expect(sentTo(OWNER).filter((message) => message.content === "echo: delivered thrice")).toHaveLength(1);
    expect(llm.requests.filter((request) => lastUser(request.body) === "delivered thrice")).toHaveLength(1);
  });

  it("refuses a forged signature before the body is decrypted or parsed", async () => {
    const { xml } = wecom.appMessage({ from: OWNER, text: "forged message" });
    const forged = await wecom.postCallback(callbackUrl, xml, { token: "guessed-token" });
    expect(forged).toMatchObject({ status: 401, body: "bad signature" });
    // A body no decrypt or parse could take (not AES blocks, no message): still 401, never 400.
    const garbage = await wecom.postCallback(callbackUrl, xml, { signature: "0".repeat(40), rawBody: "<xml><Encrypt><![CDATA[AAAA]]></Encrypt><Junk>&undefined;</xml>" });
    expect(garbage).toMatchObject({ status: 401, body: "bad signature" });
    // Signed right but for another corp: decrypted, refused before parsing.
    const foreign = await wecom.postCallback(callbackUrl, xml, { receiveId: "wwsomeoneelse" });
    expect(foreign.status).toBe(401);
    // Refused at the door: nothing of it was queued, so the next message is answered and it is not.
    await settle();
    expect(modelSaw("forged message")).toBe(false);
    expect(gateway.output()).toContain("wecom callback refused");
    expect(gateway.output()).not.toContain("wecom callback message not understood");
  });

  it("gives a stranger a pairing code and never asks the model", async () => {
    await say("let me in", STRANGER);
    const code = await replyTo(STRANGER, (text) => text.includes("countbot pairing approve"), "the pairing code");
    expect(code.content).toContain(`Your wecom id is ${STRANGER}`);
    expect(modelSaw("let me in")).toBe(false);
  });

  it("downloads an image by its MediaId for the model, and notes a file over the cap", async () => {
    const png = Buffer.from("89504e470d0a1a0a0000000d4948445200000001000000010806000000", "hex");
    wecom.addMedia("media-image-1", png, "image/png");
    wecom.addMedia("media-file-1", Buffer.alloc(5_000, 1), "application/pdf", "report.pdf");
    await wecom.postCallback(callbackUrl, wecom.appMessage({ from: OWNER, msgType: "image", mediaId: "media-image-1", extra: { PicUrl: "http://example.invalid/p.png" } }).xml);
    await wecom.waitFor(() => llm.requests.some((request) => JSON.stringify(request.body).includes("image_url")), { timeoutMs: 40_000, what: "the image at the model" });
    await wecom.postCallback(callbackUrl, wecom.appMessage({ from: OWNER, msgType: "file", mediaId: "media-file-1", extra: { FileName: "report.pdf" } }).xml);
    await replyTo(OWNER, (text) => text.includes("not downloaded: over the 1000 B limit"), "the note on the file");
    expect(wecom.requests.filter((call) => call.route === "/cgi-bin/media/get").map((call) => call.query.media_id)).toEqual(["media-image-1", "media-file-1"]);
  });

  it("splits a long reply into messages of at most 2048 bytes, in order", async () => {
    const mark = sentTo(OWNER).length;
    await say("give me the long reply");
    await replyTo(OWNER, (text) => text.includes("第11部分"), "the last part");
    const parts = sentTo(OWNER).slice(mark);
    expect(parts.length).toBeGreaterThanOrEqual(3);
    for (const part of parts) expect(Buffer.byteLength(part.content, "utf8")).toBeLessThanOrEqual(2048);
    const joined = parts.map((part) => part.content).join("");
    expect(joined.indexOf("第0部分")).toBeLessThan(joined.indexOf("第11部分"));
  });

  it("runs a team started with @团队名称 and brings its result back", { timeout: 90_000 }, async () => {
    await say("@分析团队 看看这家店");
    await replyTo(OWNER, (text) => text.startsWith("Team [分析团队] started"), "the started reply");
    const result = await replyTo(OWNER, (text) => text.startsWith("Background:"), "the team's result");
    expect(result.content).toMatch(/Team \[分析团队\] \(run ID: wf-[0-9a-f]+\) completed/);
    expect(result.content).toContain("Analyst findings");
  });

  it("shares one access token between two gateways over Redis: the standby taking over fetches none", { timeout: 90_000 }, async () => {
    expect(wecom.tokenCalls).toBe(1);
    const standby = startService(["gateway"], env);
    const standbyUrl = await listening(standby);
    await standby.waitForLog(/standing for the leader lease/);
    await gateway.stop("SIGKILL");
    gateway = standby;
    callbackUrl = standbyUrl;
    await gateway.waitForLog(/wecom channel started/, 40_000);
    await say("after the failover");
    await replyTo(OWNER, (text) => text === "echo: after the failover", "the reply from the standby");
    expect(wecom.tokenCalls).toBe(1);
  });

  it("fetches a new token once when WeCom revokes the one in use", async () => {
    wecom.revokeTokens();
    await say("after the revocation");
    await replyTo(OWNER, (text) => text === "echo: after the revocation", "the reply with a new token");
    expect(wecom.tokenCalls).toBe(2);
  });

  it("never logs the secrets", () => {
    for (const service of [gateway, worker]) {
      for (const secret of [SECRET, TOKEN, AES_KEY]) expect(service.output()).not.toContain(secret);
    }
  });
});
