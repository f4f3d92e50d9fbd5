/** `countbot audit tail` as a child process, over the embedded deployment's file and over the Redis stream. */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AuditEntry, type AuditLog, createFileAuditLog } from "../../src/tools/audit-log.js";
import { createRedisAuditLog } from "../../src/tools/redis-audit-log.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runCli } from "../support/run-cli.js";

let root: string;
let redis: Redis;
const prefix = `countbot-audit-cli-${randomUUID()}`;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-audit-cli-"));
  redis = new Redis(redisUrl);
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

const call = (tool: string): AuditEntry => ({ sessionKey: "web:a", channel: "web", chatId: "a", tool, arguments: {}, success: true, result: "ok", durationMs: 1, attempts: 1 });

async function writeCalls(log: AuditLog): Promise<void> {
  for (const tool of ["read_file", "exec", "memory"]) await log.record(call(tool));
  await log.close();
}

const tools = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((line) => (JSON.parse(line) as { tool: string }).tool);

describe("countbot audit tail", () => {
  it("prints the newest lines of the file log, oldest first", { timeout: 60_000 }, async () => {
    const dataDir = path.join(root, "data");
    await writeCalls(createFileAuditLog({ directory: path.join(dataDir, "audit"), maxFileBytes: 1_000_000, maxFiles: 2, secrets: [] }));
    const run = await runCli(["audit", "tail", "-n", "2"], { env: { HOME: root, COUNTBOT_DATA_DIR: dataDir }, cwd: root });
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(tools(run.stdout)).toEqual(["exec", "memory"]);
  });

  it("reads the Redis stream every process writes to", { timeout: 60_000 }, async () => {
    await writeCalls(createRedisAuditLog({ redis, prefix, secrets: [] }));
    const configFile = path.join(root, "redis.json");
    await writeFile(configFile, JSON.stringify({ redis: { prefix } }));
    const env = { HOME: root, COUNTBOT_DATA_DIR: path.join(root, "data-redis"), COUNTBOT_CONFIG: configFile, REDIS_URL: redisUrl };
    const run = await runCli(["audit", "tail"], { env, cwd: root });
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(tools(run.stdout)).toEqual(["read_file", "exec", "memory"]);
  });
});
