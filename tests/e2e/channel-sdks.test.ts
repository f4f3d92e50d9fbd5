/**
 * Every process loads the channel registry (the config is checked against it), but a platform's
 * SDK is loaded only by a process that runs the platform: a worker never loads discord.js, the
 * Lark SDK, telegraf or the Slack SDK, nor does a gateway whose config enables none of them. And
 * a gateway process loads no agent code (no module under src/agent: the rule `gateway-no-agent`
 * in .dependency-cruiser.cjs holds the imports, this holds what really runs, dynamic imports
 * included), while a worker and `start` do. Each process is a real `countbot` run with a preload
 * (tests/support/module-list.mjs) that writes, at exit, every module it loaded: the CommonJS ones
 * (the SDKs are CommonJS packages) and the ES modules (the project's own, built or sources). The terminal chat's Markdown
 * renderer (marked-terminal's highlighter, highlight.js: a third of a second of CPU to load) is
 * loaded by `chat` and `agent` only: each command's module is imported when it runs.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeTelegramServer, startFakeTelegram } from "../support/fake-telegram-server.js";
import { startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const recorder = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "support", "module-list.mjs");
const SDKS = { discord: /node_modules\/(discord\.js|@discordjs)\//, feishu: /node_modules\/@larksuiteoapi\//, telegram: /node_modules\/telegraf\//, slack: /node_modules\/@slack\//, terminal: /node_modules\/(highlight\.js|cli-highlight)\// };
/** The agent's modules, built (dist/src/agent/) or run as sources (src/agent/). */
const AGENT = /\/src\/agent\/[^/]+$/;
const BOT_TOKEN = "42:channel-sdks-token";

let root: string;
let prefix: string;
let redis: Redis;
let llm: FakeOpenAIServer;
let telegram: FakeTelegramServer;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-channel-sdks-"));
  prefix = `countbot-test-${randomUUID()}`;
  redis = new Redis(redisUrl);
  llm = await startFakeOpenAI({ script: () => ({ text: "ok" }) });
  telegram = await startFakeTelegram({ token: BOT_TOKEN });
});

afterAll(async () => {
  await stopAllServices();
  await telegram?.close();
  await llm?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

/** Runs `countbot <command>` until it logs `ready`, stops it, and returns which SDKs it had loaded, and whether agent code. */
async function loadedBy(
  name: string,
  command: string,
  ready: RegExp,
  config: object,
  extra: Record<string, string> = {},
  running: () => Promise<unknown> = async () => undefined,
): Promise<Record<keyof typeof SDKS | "agent", boolean>> {
  const configFile = path.join(root, `${name}.json`);
  const listFile = path.join(root, `${name}.modules.json`);
  await writeFile(configFile, JSON.stringify({ redis: { prefix }, tools: { exec: { enabled: false } }, ...config }));
  const service = startService([command], {
    HOME: root,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: path.join(root, `${name}-data`),
    COUNTBOT_API_PORT: "0",
    COUNTBOT_API_TOKEN: "channel-sdks-api-token-0123456789",
    OPENAI_API_KEY: "sk-channel-sdks-0123456789",
    OPENAI_BASE_URL: llm.url,
    LOG_LEVEL: "info",
    NODE_OPTIONS: `--import ${recorder}`,
    MODULE_LIST_FILE: listFile,
    ...extra,
  });
  await service.waitForLog(ready, 60_000);
  await running();
  // A clean exit, so the recorder's exit hook ran.
  expect(await service.stop()).toBe(0);
  const modules = JSON.parse(await readFile(listFile, "utf8")) as string[];
  // The recorder saw the process's CommonJS modules (pino is one every process loads).
  expect(modules.some((file) => /node_modules\/pino\//.test(file))).toBe(true);
  return {
    discord: modules.some((file) => SDKS.discord.test(file)),
    feishu: modules.some((file) => SDKS.feishu.test(file)),
    telegram: modules.some((file) => SDKS.telegram.test(file)),
    slack: modules.some((file) => SDKS.slack.test(file)),
    terminal: modules.some((file) => SDKS.terminal.test(file)),
    agent: modules.some((file) => !file.includes("/node_modules/") && AGENT.test(file)),
  };
}

describe("channel SDKs", () => {
  it("a worker loads none of them, and the agent", async () => {
    expect(await loadedBy("worker", "worker", /worker started/, {}, { REDIS_URL: redisUrl })).toEqual({ discord: false, feishu: false, telegram: false, slack: false, terminal: false, agent: true });
  });

  it("a gateway with only the web chat enabled loads none of them, and no agent code", async () => {
    expect(await loadedBy("gateway", "gateway", /gateway listening/, {}, { REDIS_URL: redisUrl })).toEqual({ discord: false, feishu: false, telegram: false, slack: false, terminal: false, agent: false });
  });

  it("`countbot start` with Telegram enabled loads telegraf, and only telegraf", async () => {
    const loaded = await loadedBy("start", "start", /countbot started/, { channels: { telegram: { enabled: true, allowFrom: ["1"] } } }, { TELEGRAM_BOT_TOKEN: BOT_TOKEN, TELEGRAM_API_ROOT: telegram.apiRoot }, () =>
      telegram.waitFor(() => telegram.requests.some((request) => request.method === "getUpdates"), { what: "the channel polling" }),
    );
    expect(loaded).toEqual({ discord: false, feishu: false, telegram: true, slack: false, terminal: false, agent: true });
  });
});
