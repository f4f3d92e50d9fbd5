/**
 * `countbot doctor` as an operator runs it: against a Redis that may evict and keeps no AOF it
 * fails, naming the fix; against a good one, with a model that answers and a Telegram token the
 * platform accepts, every check passes.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeTelegramServer, startFakeTelegram } from "../support/fake-telegram-server.js";
import { type OwnRedis, startRedisServer } from "../support/redis-server.js";
import { runCli } from "../support/run-cli.js";

let root: string;
let llm: FakeOpenAIServer;
let telegram: FakeTelegramServer;
let evicting: OwnRedis;
let good: OwnRedis;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-doctor-"));
  llm = await startFakeOpenAI({ script: () => ({ text: "OK" }) });
  telegram = await startFakeTelegram({ token: "77:doctor-token" });
  [evicting, good] = await Promise.all([
    startRedisServer(["--maxmemory-policy", "allkeys-lru", "--appendonly", "no"]),
    startRedisServer(["--maxmemory-policy", "noeviction", "--appendonly", "yes"]),
  ]);
});
afterAll(async () => {
  await Promise.all([evicting?.stop(), good?.stop(), llm?.close(), telegram?.close()]);
  await rm(root, { recursive: true, force: true });
});

async function doctor(redisUrl: string, token: string) {
  const configFile = path.join(root, "countbot.json");
  await writeFile(configFile, JSON.stringify({ channels: { telegram: { enabled: true, allowFrom: ["1"], limits: { group: { limit: 15 } } } } }));
  return runCli(["doctor"], {
    env: {
      HOME: root,
      COUNTBOT_CONFIG: configFile,
      COUNTBOT_DATA_DIR: path.join(root, "data"),
      OPENAI_API_KEY: "sk-doctor-0123456789",
      OPENAI_BASE_URL: llm.url,
      REDIS_URL: redisUrl,
      TELEGRAM_BOT_TOKEN: token,
      TELEGRAM_API_ROOT: telegram.apiRoot,
    },
    timeoutMs: 60_000,
  });
}

describe("countbot doctor", () => {
  it("fails on a Redis that may evict, and on a token the platform refuses, saying what to do", async () => {
    const result = await doctor(evicting.url, "77:wrong-token");
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^✗ redis: Redis maxmemory-policy is "allkeys-lru".*Set it to noeviction/m);
    expect(result.stdout).toMatch(/^✗ channel telegram: .*(401|Unauthorized)/m);
    expect(result.stdout).toMatch(/^✓ model openai\/gpt-4o-mini \(agent\.model, subagents\): answers/m);
    expect(result.stdout).toMatch(/2 checks failed\n$/);
    expect(result.stdout + result.stderr).not.toContain("wrong-token");
  });

  it("passes on a good Redis with a model that answers and accepted credentials", async () => {
    const result = await doctor(good.url, "77:doctor-token");
    expect(result.stdout).toMatch(/^✓ redis: Redis \d+\.\d+\.\d+, maxmemory-policy noeviction, appendonly yes$/m);
    expect(result.stdout).toMatch(/^✓ channel telegram: credentials accepted: @CountBot$/m);
    // The send budgets it keeps to: the published ones, with the config's override applied.
    expect(result.stdout).toMatch(/^✓ limits telegram: chat: 1 per 1 s per chat \(send, edit, draft\); group: 15 per 1 min per group chat \(send, edit\); bot: 30 per 1 s per bot account$/m);
    expect(result.stdout).toMatch(/^✓ (data directory|workspace): /m);
    expect(result.stdout).toContain("everything CountBot needs is in place");
    expect(result.code).toBe(0);
  });

  it("checks every model the config and the team store use, one line each, and fails naming a team whose provider is not configured", async () => {
    const configFile = path.join(root, "teams.json");
    const dataDir = path.join(root, "teams-data");
    await mkdir(dataDir, { recursive: true });
    await writeFile(
      configFile,
      JSON.stringify({
        agent: { fallbackModels: ["deepseek/deepseek-chat"] },
        tools: { braveApiKey: "${SEARCH_KEY}" },
        teams: {
          research: {
            mode: "pipeline",
            agents: [
              { id: "writer", role: "Writer", task: "write", model: "mistral/mistral-small-latest" },
              { id: "critic", role: "Critic", task: "criticise" },
            ],
          },
        },
      }),
    );
    // A team created through the API, in the file store of a deployment without Redis.
    const stored = { id: "team-stored", name: "Night Shift", description: "", mode: "pipeline", enabled: true, crossReview: false, maxIterations: 10, nodeTimeoutSeconds: 600, agents: [{ id: "solo", role: "Solo", task: "work", dependsOn: [], model: "acme/m1" }], createdAt: 1, updatedAt: 1 };
    await writeFile(path.join(dataDir, "teams.json"), JSON.stringify({ version: 1, teams: [stored] }));
    const before = llm.requests.length;
    const result = await runCli(["doctor"], {
      env: { HOME: root, COUNTBOT_CONFIG: configFile, COUNTBOT_DATA_DIR: dataDir, OPENAI_API_KEY: "sk-doctor-0123456789", OPENAI_BASE_URL: llm.url, DEEPSEEK_API_KEY: "sk-deepseek-0123456789", DEEPSEEK_BASE_URL: llm.url },
      timeoutMs: 60_000,
    });
    expect(result.code).toBe(1);
    const models = result.stdout.split("\n").filter((line) => / model /.test(` ${line.slice(2)}`));
    expect(models).toEqual([
      expect.stringMatching(/^✓ model openai\/gpt-4o-mini \(agent\.model, subagents; team "research" \(critic\)\): answers \("OK"\)$/),
      expect.stringMatching(/^✓ model deepseek\/deepseek-chat \(agent\.fallbackModels\[0\]\): answers/),
      expect.stringMatching(/^✗ model acme\/m1 \(team "Night Shift" \(solo\)\): Unknown provider "acme" in model "acme\/m1"/),
      expect.stringMatching(/^✗ model mistral\/mistral-small-latest \(team "research" \(writer\)\): No API key for provider "mistral" .*Set MISTRAL_API_KEY or providers\.mistral\.apiKey/),
    ]);
    // Each model asked once: the agent's (shared with the critic) and the fallback.
    expect(llm.requests.length - before).toBe(2);
    expect(llm.requests.slice(before).map((request) => request.headers.authorization)).toEqual(["Bearer sk-doctor-0123456789", "Bearer sk-deepseek-0123456789"]);
    expect(result.stdout).toMatch(/^! variables: not set, so these fields were left out: \$\{SEARCH_KEY\} \(tools\.braveApiKey\)$/m);
    expect(result.stdout).toMatch(/2 checks failed\n$/);
  });
});
