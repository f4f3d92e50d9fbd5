/**
 * Workers that do not share a workspace are told so: two workers on one Redis with workspaces of
 * their own, the second warns at start and `countbot doctor` fails its "workspace shared" check;
 * two workers on one workspace do not.
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
const prefixes: string[] = [];

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-workspace-"));
  llm = await startFakeOpenAI({ script: () => ({ text: "OK" }) });
});
afterAll(async () => {
  await stopAllServices();
  await llm.close();
  const redis = new Redis(redisUrl);
  for (const prefix of prefixes) await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

async function deployment(name: string) {
  const prefix = `countbot-workspace-${randomUUID()}`;
  prefixes.push(prefix);
  const configFile = path.join(root, `${name}.json`);
  await writeFile(configFile, JSON.stringify({ redis: { prefix } }));
  return (workspace: string) => ({
    HOME: root,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: path.join(root, `${name}-data-${workspace}`),
    COUNTBOT_WORKSPACE: path.join(root, `${name}-${workspace}`),
    OPENAI_API_KEY: "sk-workspace-0123456789",
    OPENAI_BASE_URL: llm.url,
    REDIS_URL: redisUrl,
    LOG_LEVEL: "info",
  });
}

describe("workspace across machines", () => {
  it("warns when workers do not share one, and doctor says so", async () => {
    const env = await deployment("apart");
    const first = startService(["worker"], env("a"));
    await first.waitForLog(/worker started/, 60_000);
    const second = startService(["worker"], env("b"));
    const warning = await second.waitForLog(/is not shared with 1 other worker/, 60_000);
    expect(String(warning.msg)).toContain("mount one shared volume");
    const doctor = await runCli(["doctor"], { env: env("b"), timeoutMs: 60_000 });
    expect(doctor.stdout).toMatch(/^✗ workspace shared: the workspace .* is not shared with 1 other worker/m);
    expect(doctor.code).toBe(1);
  });

  it("says nothing when they share one", async () => {
    const env = await deployment("together");
    const first = startService(["worker"], env("shared"));
    await first.waitForLog(/worker started/, 60_000);
    const second = startService(["worker"], env("shared"));
    await second.waitForLog(/worker started/, 60_000);
    expect(second.output()).not.toContain("is not shared");
    const doctor = await runCli(["doctor"], { env: env("shared"), timeoutMs: 60_000 });
    expect(doctor.stdout).toMatch(/^✓ workspace shared: sees the markers of all 2 worker\(s\)$/m);
  });
});
