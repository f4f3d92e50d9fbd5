/**
 * Channels fail alone, end to end: `countbot start` over Redis with Discord unreachable (its API
 * behind a proxy that turns connections away) and Telegram and the web page working. The process
 * starts, the web page and Telegram answer, and `/ready` (200), `GET /api/operations`, `countbot
 * status`, `/metrics` and the console's Operations view (in Chromium) show Discord down and the others up; once Discord can be reached it
 * connects by itself, and the log has one line for the outage, not one per attempt.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { launchBrowser, loopbackContext } from "../support/browser.js";
import { screenshot, signIn } from "../support/console-page.js";
import { type FakeDiscordServer, startFakeDiscord } from "../support/fake-discord-server.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type FakeTelegramServer, startFakeTelegram } from "../support/fake-telegram-server.js";
import { startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runCli } from "../support/run-cli.js";
import { type TcpProxy, startTcpProxy } from "../support/tcp-proxy.js";

let root: string;
let llm: FakeOpenAIServer;
let telegram: FakeTelegramServer;
let discord: FakeDiscordServer;
let proxy: TcpProxy;
let browser: Browser | undefined;
const prefix = `countbot-health-${randomUUID()}`;
const token = "health-token-0123456789-abcdef";

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-health-"));
  llm = await startFakeOpenAI({ script: () => ({ text: "pong" }) });
  telegram = await startFakeTelegram({ token: "77:health" });
  discord = await startFakeDiscord({ token: "discord-health" });
  proxy = await startTcpProxy({ port: Number(new URL(discord.origin).port) });
  proxy.refuse();
});
afterAll(async () => {
  await browser?.close();
  await stopAllServices();
  await Promise.all([llm.close(), telegram.close(), discord.close(), proxy.close()]);
  const redis = new Redis(redisUrl);
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

describe("a platform down at start", () => {
  it("leaves the others serving, shows its state everywhere, and connects by itself when it comes back", async () => {
    const configFile = path.join(root, "countbot.json");
    await writeFile(configFile, JSON.stringify({ redis: { prefix }, channels: { telegram: { enabled: true, allowFrom: ["42"] }, discord: { enabled: true, allowFrom: ["1"] } } }));
    const env = {
      HOME: root,
      COUNTBOT_CONFIG: configFile,
      COUNTBOT_DATA_DIR: path.join(root, "data"),
      COUNTBOT_API_PORT: "0",
      COUNTBOT_API_TOKEN: token,
      OPENAI_API_KEY: "sk-health-0123456789",
      OPENAI_BASE_URL: llm.url,
      REDIS_URL: redisUrl,
      TELEGRAM_BOT_TOKEN: "77:health",
      TELEGRAM_API_ROOT: telegram.apiRoot,
      DISCORD_BOT_TOKEN: "discord-health",
      DISCORD_API_ROOT: `${proxy.url}/api`,
      LOG_LEVEL: "info",
    };
    const service = startService(["start"], env);
    const started = await service.waitForLog(/countbot started/, 60_000);
    const base = String(started.url);
    const get = (route: string) => fetch(`${base}${route}`, { headers: { authorization: `Bearer ${token}` } });

    // Telegram answers as usual.
    telegram.sendText({ chatId: 42, from: telegram.user({ id: 42 }), text: "ping" });
    await telegram.waitFor(() => telegram.sent.find((item) => item.method === "sendMessage" && item.text === "pong"), { timeoutMs: 30_000, what: "the Telegram reply" });

    const ready = await get("/ready");
    expect(ready.status).toBe(200);
    const readiness = (await ready.json()) as { channels: Array<{ name: string; state: string; lastError?: { kind: string } }> };
    const states = Object.fromEntries(readiness.channels.map((channel) => [channel.name, channel.state]));
    expect(states).toEqual({ telegram: "up", discord: "down", web: "up" });
    expect(readiness.channels.find((channel) => channel.name === "discord")!.lastError?.kind).toBe("network");

    const operations = (await (await get("/api/operations")).json()) as { ready: boolean; channels: Array<{ name: string; state: string; retryAt?: string }> };
    expect(operations.ready).toBe(true);
    expect(operations.channels.find((channel) => channel.name === "discord")).toMatchObject({ state: "down", retryAt: expect.any(String) });

    const metrics = await (await get("/metrics")).text();
    expect(metrics).toMatch(/countbot_channel_up\{[^}]*channel="discord"[^}]*\} 0/);
    expect(metrics).toMatch(/countbot_channel_up\{[^}]*channel="telegram"[^}]*\} 1/);

    // The console's Operations view: a row per channel with its state, and Discord's error.
    browser = await launchBrowser();
    const { context, refused } = await loopbackContext(browser);
    const page = await context.newPage();
    await signIn(page, base, token, "operations");
    const discordRow = page.locator('tr[data-channel="discord"]');
    await discordRow.getByText("down", { exact: true }).waitFor();
    expect(await discordRow.textContent()).toMatch(/network:.*next try/);
    await page.locator('tr[data-channel="telegram"]').getByText("up", { exact: true }).waitFor();
    await page.locator('tr[data-channel="web"]').getByText("up", { exact: true }).waitFor();
    await screenshot(page, "operations-channels");
    expect(refused).toEqual([]);

    await vi.waitFor(
      async () => {
        const status = await runCli(["status"], { env, timeoutMs: 60_000 });
        expect(status.stdout).toMatch(/^ {4}discord +down for .*: discord/m);
        expect(status.stdout).toMatch(/^ {4}telegram +up for /m);
      },
      { timeout: 40_000, interval: 1_000 },
    );

    // Discord comes back: the channel connects without a restart.
    proxy.accept();
    await vi.waitFor(
      async () => {
        const body = (await (await get("/ready")).json()) as { channels: Array<{ name: string; state: string }> };
        expect(body.channels.find((channel) => channel.name === "discord")?.state).toBe("up");
      },
      { timeout: 90_000, interval: 500 },
    );
    // The view follows (it polls): Discord up, its outage still named as the last error.
    await discordRow.getByText("up", { exact: true }).waitFor({ timeout: 30_000 });
    await context.close();
    const lines = service.output().split("\n").filter((line) => line.includes('"channel":"discord"') && /"state":"down"/.test(line));
    expect(lines).toHaveLength(1);
  }, 240_000);
});
