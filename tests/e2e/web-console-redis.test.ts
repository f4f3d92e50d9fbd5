/**
 * The web console over Redis (`countbot start` with REDIS_URL): the Operations view links the
 * BullMQ dashboard, and bull-board at `/admin/queues` renders in Chromium for a browser signed in
 * by the token cookie alone: its queue list is drawn (scripts and styles not blocked by the CSP),
 * and nothing it asks for leaves loopback.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, loopbackContext } from "../support/browser.js";
import { type ConsoleService, startConsoleService } from "../support/console-service.js";
import { screenshot, signIn } from "../support/console-page.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const TOKEN = "console-redis-token-0123456789";

let root: string;
let prefix: string;
let llm: FakeOpenAIServer;
let countbot: ConsoleService;
let browser: Browser;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-console-redis-"));
  prefix = `countbot-console-${randomUUID()}`;
  llm = await startFakeOpenAI({ script: () => ({ text: "hello over Redis" }) });
  [countbot, browser] = await Promise.all([
    startConsoleService({ root, token: TOKEN, modelUrl: llm.url, config: { redis: { prefix } }, env: { REDIS_URL: redisUrl } }),
    launchBrowser(),
  ]);
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await stopAllServices();
  await llm?.close();
  const redis = new Redis(redisUrl);
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

describe("the queue dashboard", () => {
  it("is linked from Operations and renders its queue list for a browser signed in by cookie", async () => {
    const { context, refused } = await loopbackContext(browser);
    const page = await context.newPage();
    const blocked: string[] = [];
    page.on("console", (message) => {
      if (/Content Security Policy/i.test(message.text())) blocked.push(message.text());
    });
    const failures: string[] = [];
    page.on("pageerror", (error) => failures.push(error.message));

    await signIn(page, countbot.base, TOKEN, "operations");
    await page.getByText("Gateways and workers over Redis").waitFor();
    const link = page.getByRole("link", { name: "Queue dashboard" });
    expect(await link.getAttribute("href")).toBe("/admin/queues");
    // Without the cookie the dashboard is refused: the test's sign-in is what lets it in.
    expect((await fetch(`${countbot.base}/admin/queues`)).status).toBe(401);

    await page.goto(`${countbot.base}/admin/queues`);
    // Drawn by its own scripts (the page it is sent is an empty root): the queue list and a card per queue.
    for (const queue of ["subagents", "workflows"]) await page.getByRole("link", { name: queue, exact: true }).first().waitFor();
    await page.getByText(/^\d+ Jobs$/).nth(1).waitFor();
    await screenshot(page, "queue-dashboard");
    // The CSP refuses only the web font it would fetch from elsewhere; nothing is sent beyond loopback.
    expect(blocked.filter((text) => !text.includes("https://fonts.googleapis.com/"))).toEqual([]);
    expect(failures).toEqual([]);
    expect(refused).toEqual([]);
    await context.close();
  });
});
