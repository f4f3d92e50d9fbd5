/**
 * A config reload on a running gateway and worker, without a restart: SIGHUP to the gateway lets a
 * sender the allowlist now names in, and the worker (told over the bus) answers with the new
 * persona and the tools of an MCP server the new config adds; a config that does not load is
 * refused with one log line and the old one stays.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeTelegramServer, startFakeTelegram } from "../support/fake-telegram-server.js";
import { stdioServerEntry } from "../support/mcp-fixtures.js";
import { type ServiceProcess, startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const BOT_TOKEN = "4242:reload-token";
const OWNER = 1001;
const NEWCOMER = 1002;
let root: string;
let prefix: string;
let configFile: string;
let redis: Redis;
let telegram: FakeTelegramServer;
let llm: FakeOpenAIServer;
let gateway: ServiceProcess;
let worker: ServiceProcess;

const config = (allowFrom: number[], persona: string, mcpServers: Record<string, unknown> = {}) => ({
  redis: { prefix },
  agent: { providerRetries: 0, persona: { name: persona } },
  channels: { telegram: { enabled: true, allowFrom: allowFrom.map(String) } },
  tools: { mcpServers },
});

const toolNames = (body: Record<string, unknown>) => ((body.tools ?? []) as Array<{ function: { name: string } }>).map((tool) => tool.function.name);

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-reload-"));
  prefix = `countbot-reload-${randomUUID()}`;
  redis = new Redis(redisUrl);
  telegram = await startFakeTelegram({ token: BOT_TOKEN });
  llm = await startFakeOpenAI({ script: () => ({ text: "hello from the model" }) });
  configFile = path.join(root, "countbot.json");
  await writeFile(configFile, JSON.stringify(config([OWNER], "Alpha")));
  const env = {
    HOME: root,
    REDIS_URL: redisUrl,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: path.join(root, "data"),
    COUNTBOT_API_PORT: "0",
    COUNTBOT_API_TOKEN: "reload-api-token-0123456789",
    TELEGRAM_BOT_TOKEN: BOT_TOKEN,
    TELEGRAM_API_ROOT: telegram.apiRoot,
    OPENAI_API_KEY: "sk-reload-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
  };
  gateway = startService(["gateway"], env);
  worker = startService(["worker"], env);
  await Promise.all([gateway.waitForLog(/channel connected/, 60_000), worker.waitForLog(/worker started/, 60_000)]);
}, 90_000);

afterAll(async () => {
  await stopAllServices();
  await telegram?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

function systemPrompt(body: Record<string, unknown>): string {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  return String(messages.find((message) => message.role === "system")?.content ?? "");
}

async function sendAndWait(chatId: number, text: string) {
  const mark = telegram.sent.length;
  telegram.sendText({ chatId, from: telegram.user({ id: chatId, first_name: `User ${chatId}` }), text });
  return telegram.waitFor(() => telegram.sent.slice(mark).find((item) => item.chatId === chatId && item.method === "sendMessage"), { timeoutMs: 30_000, what: `a message to ${chatId}` });
}

describe("config reload", () => {
  it("applies a new allowlist and persona to the running gateway and worker on SIGHUP, and refuses a broken config", async () => {
    const before = llm.requests.length;
    const pairing = await sendAndWait(NEWCOMER, "hello?");
    expect(pairing.text).toContain("pairing code");
    expect(llm.requests.length).toBe(before);


    await writeFile(configFile, JSON.stringify(config([OWNER, NEWCOMER], "Beta", { notes: stdioServerEntry() })));
    process.kill(gateway.pid, "SIGHUP");
    const [, reloaded] = await Promise.all([gateway.waitForLog(/^config reloaded/, 30_000), worker.waitForLog(/^config reloaded/, 30_000)]);
    // MCP servers change live: nothing of `tools` waits for a restart.
    expect(reloaded.restartNeeded).toEqual([]);

    const answer = await sendAndWait(NEWCOMER, "now?");
    expect(answer.text).toBe("hello from the model");
    expect(systemPrompt(llm.requests.at(-1)!.body)).toContain("You are Beta");
    expect(toolNames(llm.requests.at(-1)!.body)).toContain("mcp_notes_echo");

    await writeFile(configFile, "{ not json");
    process.kill(gateway.pid, "SIGHUP");
    await gateway.waitForLog(/^config reload refused, the old config stays in force: Invalid JSON/, 30_000);
    const still = await sendAndWait(NEWCOMER, "still there?");
    expect(still.text).toBe("hello from the model");
  });
});
