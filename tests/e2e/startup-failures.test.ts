/**
 * A process that cannot start exits, non-zero, with one line naming the cause, within seconds, and
 * leaves nothing running: a port that is taken, a bind beyond loopback without a token, a Redis
 * that does not answer. A platform token the platform refuses does not stop it: that channel is
 * down, said so once, and tried again only rarely, while the rest serves.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { type Server, createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeTelegramServer, startFakeTelegram } from "../support/fake-telegram-server.js";
import { startService, stopAllServices } from "../support/processes.js";
import { runCli } from "../support/run-cli.js";

let root: string;
let held: Server;
let heldPort: number;
let closedPort: number;
let telegram: FakeTelegramServer;

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)));
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-startup-"));
  held = createServer();
  heldPort = await listen(held);
  // A port nothing listens on: opened, noted, closed.
  const probe = createServer();
  closedPort = await listen(probe);
  await new Promise((resolve) => probe.close(resolve));
  telegram = await startFakeTelegram({ token: "42:the-real-token" });
});
afterAll(async () => {
  await stopAllServices();
  await new Promise((resolve) => held.close(resolve));
  await telegram.close();
  await rm(root, { recursive: true, force: true });
});

const env = (extra: Record<string, string>) => ({ HOME: root, COUNTBOT_DATA_DIR: path.join(root, "data"), OPENAI_API_KEY: "sk-startup-0123456789", LOG_LEVEL: "silent", ...extra });

/** Exits on its own (the run's timeout would reject otherwise), with one line on stderr. */
function expectOneLine(stderr: string, pattern: RegExp): void {
  expect(stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(stderr).toMatch(pattern);
}

describe("start-up failures", () => {
  it("exits when the API's port is taken", async () => {
    const start = await runCli(["start"], { env: env({ COUNTBOT_API_PORT: String(heldPort) }), timeoutMs: 60_000 });
    expect(start.code).toBe(2);
    expectOneLine(start.stderr, new RegExp(`^countbot: cannot serve the API on 127\\.0\\.0\\.1:${heldPort}: the port is already in use`));
  });

  it("refuses to bind beyond loopback without a token, and exits", async () => {
    const result = await runCli(["start"], { env: env({ COUNTBOT_API_HOST: "0.0.0.0", COUNTBOT_API_PORT: "0" }), timeoutMs: 60_000 });
    expect(result.code).toBe(2);
    expectOneLine(result.stderr, /^countbot: refusing to serve the API on 0\.0\.0\.0 without a token: set api\.token/);
  });

  it("exits when Redis does not answer, naming the address without its password", async () => {
    const configFile = path.join(root, "redis-timeout.json");
    await writeFile(configFile, JSON.stringify({ redis: { connectTimeoutMs: 500 } }));
    const result = await runCli(["worker"], { env: env({ COUNTBOT_CONFIG: configFile, REDIS_URL: `redis://:hunter2-secret@127.0.0.1:${closedPort}` }), timeoutMs: 60_000 });
    expect(result.code).toBe(2);
    expectOneLine(result.stderr, new RegExp(`^countbot: Redis at redis://:\\*\\*\\*\\*@127\\.0\\.0\\.1:${closedPort}/? cannot be reached: .*ECONNREFUSED`));
    expect(result.stderr + result.stdout).not.toContain("hunter2-secret");
  });

  it("does not exit when the platform refuses the bot token: the channel is down for it, reported as such, and not hammered", async () => {
    const configFile = path.join(root, "telegram.json");
    await writeFile(configFile, JSON.stringify({ channels: { telegram: { enabled: true, allowFrom: ["1"] } } }));
    const service = startService(["start"], { ...env({ COUNTBOT_CONFIG: configFile, COUNTBOT_API_PORT: "0", TELEGRAM_BOT_TOKEN: "42:a-wrong-token", TELEGRAM_API_ROOT: telegram.apiRoot }), LOG_LEVEL: "info" });
    try {
      const started = await service.waitForLog(/countbot started/, 60_000);
      const down = await service.waitForLog(/refused the credentials/, 10_000);
      expect(down).toMatchObject({ channel: "telegram", state: "down", kind: "auth" });
      const ready = await fetch(`${String(started.url)}/ready`);
      expect(ready.status).toBe(200);
      const body = (await ready.json()) as { channels: Array<{ name: string; state: string; lastError?: { kind: string; message: string } }> };
      const channel = body.channels.find((entry) => entry.name === "telegram")!;
      expect(channel).toMatchObject({ state: "down", lastError: { kind: "auth" } });
      expect(channel.lastError!.message).toMatch(/401/);
      expect(service.output()).not.toContain("a-wrong-token");
      // One getMe: the next try is minutes away.
      expect(telegram.requests.filter((request) => request.method === "getMe").length).toBe(1);
    } finally {
      await service.stop();
    }
  });
});
