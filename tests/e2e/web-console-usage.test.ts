/**
 * The web console's usage view in headless Chromium against a real `countbot start` (one process,
 * the ledger in its data directory) and the fake model server reporting 1,500 tokens a call: the
 * chat answered until its person's budget is used up and then refused with the budget's reply,
 * `/usage` in the chat, the usage report by person and by model, the person's budget with its meter.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, loopbackContext } from "../support/browser.js";
import { type ConsoleService, startConsoleService } from "../support/console-service.js";
import { lastUserText, screenshot, signIn } from "../support/console-page.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { stopAllServices } from "../support/processes.js";

const TOKEN = "console-usage-token-0123456789";

let root: string;
let llm: FakeOpenAIServer;
let countbot: ConsoleService;
let browser: Browser;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-console-usage-"));
  llm = await startFakeOpenAI({ script: (body) => ({ text: `echo: ${lastUserText(body)}`, usage: { promptTokens: 1_000, completionTokens: 500 } }) });
  [countbot, browser] = await Promise.all([
    startConsoleService({ root, token: TOKEN, modelUrl: llm.url, config: { agent: { maxTokens: 500 }, budgets: { person: { limit: 3_000 } } }, env: { COUNTBOT_MODEL: "openai/gpt-4o-mini" } }),
    launchBrowser(),
  ]);
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await stopAllServices();
  await llm?.close();
  await rm(root, { recursive: true, force: true });
});

async function say(page: Page, text: string, reply: string | RegExp): Promise<void> {
  await page.getByLabel("Message", { exact: true }).fill(text);
  await page.keyboard.press("Enter");
  await page.locator('[data-kind="assistant"]:not([aria-busy="true"])').filter({ hasText: reply }).last().waitFor();
}

describe("usage view", () => {
  it("shows the chat refused at the budget, /usage, the report by person and model, and the person's budget", { timeout: 120_000 }, async () => {
    const { context } = await loopbackContext(browser);
    const page = await context.newPage();
    await signIn(page, countbot.base, TOKEN, "chat");
    await page.goto(`${countbot.base}/#/chat/usage-chat`);
    await page.getByText("Connected", { exact: true }).waitFor();
    await say(page, "first", "echo: first");
    await say(page, "second", "echo: second");
    await say(page, "third", "Sorry, I can't answer this: your daily budget is used up (3,000 tokens of 3,000 tokens).");
    await say(page, "/usage", "You (web:web-user): 3,000 tokens of 3,000 tokens used, 100% of your daily budget (used up).");
    expect(llm.requests).toHaveLength(2);

    await page.goto(`${countbot.base}/#/usage`);
    const row = page.locator('table[data-usage-by="person"] tr[data-key="web:web-user"]');
    await row.waitFor();
    expect(await row.locator("td[data-tokens]").getAttribute("data-tokens")).toBe("3000");
    expect(await row.locator("td").first().textContent()).toBe("2");
    // 2,000 input at 0.15 and 1,000 output at 0.60 per million.
    expect(await row.locator("td").last().textContent()).toBe("0.0009");

    await page.getByLabel("Person", { exact: true }).fill("web:web-user");
    const budget = page.locator('li[data-budget="person"]');
    await budget.filter({ hasText: "3,000 of 3,000 tokens" }).waitFor();
    expect(await budget.locator("meter").getAttribute("value")).toBe("3000");
    await screenshot(page, "usage");

    await page.getByLabel("Group by").selectOption("model");
    await page.locator('table[data-usage-by="model"] tr[data-key="openai/gpt-4o-mini"]').waitFor();
    await context.close();
  });
});
