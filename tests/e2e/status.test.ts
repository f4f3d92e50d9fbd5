/**
 * `countbot status` over Redis: the gateway and the worker that run are listed; once the worker is
 * stopped it is gone from the list, and status says (exit 1) that nothing answers messages.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runCli } from "../support/run-cli.js";

let root: string;
let llm: FakeOpenAIServer;
const prefix = `countbot-status-${randomUUID()}`;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-status-"));
  llm = await startFakeOpenAI({ script: () => ({ text: "hi" }) });
});
afterAll(async () => {
  await stopAllServices();
  await llm.close();
  const redis = new Redis(redisUrl);
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

describe("countbot status", () => {
  it("lists the processes alive, and fails once nothing answers messages", async () => {
    const configFile = path.join(root, "countbot.json");
    await writeFile(configFile, JSON.stringify({ redis: { prefix } }));
    const env = {
      HOME: root,
      COUNTBOT_CONFIG: configFile,
      COUNTBOT_DATA_DIR: path.join(root, "data"),
      COUNTBOT_API_PORT: "0",
      COUNTBOT_API_TOKEN: "status-token-0123456789abc",
      OPENAI_API_KEY: "sk-status-0123456789",
      OPENAI_BASE_URL: llm.url,
      REDIS_URL: redisUrl,
      LOG_LEVEL: "info",
    };
    const gateway = startService(["gateway"], env);
    const worker = startService(["worker"], env);
    await Promise.all([gateway.waitForLog(/gateway listening/, 60_000), worker.waitForLog(/worker started/, 60_000)]);

    const both = await runCli(["status"], { env, timeoutMs: 60_000 });
    expect(both.code).toBe(0);
    expect(both.stdout).toMatch(/^processes \(2\):$/m);
    expect(both.stdout).toMatch(new RegExp(`^  gateway .*:${gateway.pid}  up `, "m"));
    expect(both.stdout).toMatch(new RegExp(`^  worker .*:${worker.pid}  up `, "m"));
    expect(both.stdout).toMatch(/^chats: 0 waiting for a worker, 0 being answered$/m);
    expect(both.stdout).toMatch(/^dead letters: 0$/m);

    expect(await worker.stop("SIGTERM")).toBe(0);
    const alone = await runCli(["status"], { env, timeoutMs: 60_000 });
    expect(alone.code).toBe(1);
    expect(alone.stdout).toMatch(/^processes \(1\):$/m);
    expect(alone.stdout).not.toMatch(/^ {2}worker /m);
  });
});
