/**
 * The web console in headless Chromium against a real `countbot start` (in-memory bus, file
 * store) and the fake model server: signing in, a reply that streams, tool-call lines, a model
 * reply that tries to run script, an attached image, /stop and /new, a network drop (through a
 * loopback proxy that cuts the page's connections), and every view at phone width with its fields
 * labelled. One process and one browser for the file.
 */
import { type Server, createServer } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, loopbackContext } from "../support/browser.js";
import { type ConsoleService, startConsoleService } from "../support/console-service.js";
import { gate, lastUserText, openAllGates, overflowWidth, screenshot, signIn, unlabelledFields, until } from "../support/console-page.js";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../support/fake-openai-server.js";
import { stopAllServices } from "../support/processes.js";
import { type TcpProxy, startTcpProxy } from "../support/tcp-proxy.js";

const TOKEN = "console-chat-token-0123456789";
/** A 1×1 PNG. */
const DOT_PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", "base64");

const streamGate = gate();
const heldAnswer = gate();
const never = gate();

let tripwireUrl = "";
/** Requests that reached the tripwire: a script from a reply that ran would call it. */
const tripwireHits: string[] = [];

function evilReply(): string {
  return [
    "Evil reply begins.",
    `<script>window.__countbotPwned = "script"; fetch("${tripwireUrl}/script")</script>`,
    `<img src="x" onerror="window.__countbotPwned = 'img'; fetch('${tripwireUrl}/img')">`,
    `<a href="javascript:window.__countbotPwned = 'link'">a javascript link</a>`,
    `[a markdown link](javascript:window.__countbotPwned='markdown')`,
    `<iframe src="${tripwireUrl}/frame"></iframe>`,
    `<svg><script>window.__countbotPwned = "svg"</script></svg>`,
    `<form action="${tripwireUrl}/form"><button>Send</button></form>`,
    "Evil reply ends here.",
  ].join("\n\n");
}

function script(body: Record<string, unknown>): FakeOpenAIStep {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = messages.at(-1)!;
  const text = lastUserText(body);
  if (last.role === "tool") return { text: `Listed the workspace: ${String(last.content).slice(0, 60)}` };
  if (text.includes("stream please")) return { text: ["Streaming ", "**the reply** ", "as it comes"], holdUntil: streamGate.promise };
  if (text.includes("list files")) return { toolCalls: [{ name: "list_dir", arguments: "{}" }] };
  if (text.includes("be evil")) return { text: evilReply() };
  if (text.includes("picture")) return { text: "A picture of a single dot." };
  if (text.includes("think aloud")) return { reasoning: ["The user wants my reasoning ", "shown apart."], text: "Here is the answer alone." };
  if (text.includes("think forever")) return { text: ["Thinking it over"], holdUntil: never.promise };
  if (text.includes("hold on")) return { text: "The held answer.", until: heldAnswer.promise };
  const exchange = /^exchange (\d+)$/.exec(text);
  if (exchange) {
    // Several paragraphs, streamed: a dozen of these fill the transcript.
    const number = exchange[1];
    return { text: [`Answer ${number} begins.\n\n`, "A second paragraph ", "of the answer.\n\n", "- a list item\n- another\n\n", `Answer ${number} ends here.`], hangMs: 50 };
  }
  return { text: `echo: ${text}` };
}

let root: string;
let llm: FakeOpenAIServer;
let tripwire: Server;
let countbot: ConsoleService;
let browser: Browser;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-console-chat-"));
  tripwire = createServer((request, response) => {
    tripwireHits.push(request.url ?? "");
    response.end("tripped");
  });
  await new Promise<void>((resolve) => tripwire.listen(0, "127.0.0.1", resolve));
  tripwireUrl = `http://127.0.0.1:${(tripwire.address() as { port: number }).port}`;
  llm = await startFakeOpenAI({ script });
  [countbot, browser] = await Promise.all([startConsoleService({ root, token: TOKEN, modelUrl: llm.url, config: { agent: { showReasoning: true } } }), launchBrowser()]);
}, 90_000);

afterAll(async () => {
  openAllGates();
  await browser?.close();
  await stopAllServices();
  await llm?.close();
  await new Promise((resolve) => tripwire?.close(resolve));
  await rm(root, { recursive: true, force: true });
});

/** A signed-in page on a chat of its own. */
async function chatPage(chatId: string, options: { base?: string; width?: number; height?: number } = {}): Promise<{ page: Page; refused: string[] }> {
  const { context, refused } = await loopbackContext(browser, options);
  const page = await context.newPage();
  await signIn(page, options.base ?? countbot.base, TOKEN);
  await page.goto(`${options.base ?? countbot.base}/#/chat/${chatId}`);
  await page.getByText("Connected", { exact: true }).waitFor();
  return { page, refused };
}

async function say(page: Page, text: string): Promise<void> {
  await page.getByLabel("Message", { exact: true }).fill(text);
  await page.keyboard.press("Enter");
}

const replies = (page: Page) => page.locator('[data-kind="assistant"]');

describe("signing in", () => {
  it("takes the token by keyboard, refuses a wrong one at the field, keeps it in an HttpOnly cookie, and signs out", async () => {
    const { context } = await loopbackContext(browser);
    const page = await context.newPage();
    await page.goto(countbot.base);
    const field = page.getByLabel("API token");
    await field.waitFor();
    expect(await field.evaluate((element) => element === element.ownerDocument.activeElement)).toBe(true);
    await screenshot(page, "login");

    await page.keyboard.type("not-the-token");
    await page.keyboard.press("Enter");
    await page.getByRole("alert").filter({ hasText: "wrong token" }).waitFor();
    expect(await field.getAttribute("aria-invalid")).toBe("true");

    await field.fill(TOKEN);
    await page.keyboard.press("Enter");
    await page.getByLabel("Message", { exact: true }).waitFor();
    const [cookie] = (await context.cookies()).filter((candidate) => candidate.name === "countbot_token");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    // The page never holds the token itself.
    expect(await page.evaluate("document.cookie + JSON.stringify(localStorage)")).not.toContain(TOKEN);

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("API token").waitFor();
    expect((await context.cookies()).filter((candidate) => candidate.name === "countbot_token")).toEqual([]);
    await context.close();
  });
});

describe("chat", () => {
  it("streams the reply in, then shows it final as Markdown, with a tool call as one line", async () => {
    const { page } = await chatPage("streaming");
    await say(page, "stream please");
    const draft = page.locator('[data-kind="assistant"].streaming');
    await draft.filter({ hasText: "Streaming the reply as it comes" }).waitFor();
    expect(await draft.getAttribute("aria-busy")).toBe("true");
    streamGate.open();
    await page.locator('[data-kind="assistant"]:not(.streaming)').filter({ hasText: "Streaming the reply as it comes" }).waitFor();
    expect(await replies(page).first().locator("strong").textContent()).toBe("the reply");

    await say(page, "list files please");
    await replies(page).filter({ hasText: "Listed the workspace" }).waitFor();
    const tools = page.locator('[data-kind="tool"]');
    expect(await tools.count()).toBe(1);
    expect(await tools.textContent()).toContain("list_dir");
    expect(await replies(page).count()).toBe(2);
    await screenshot(page, "chat");
    await page.context().close();
  });

  it("shows the model's reasoning dimmed, apart from the reply, with agent.showReasoning", async () => {
    const { page } = await chatPage("reasoning");
    await say(page, "think aloud please");
    await replies(page).filter({ hasText: "Here is the answer alone." }).waitFor();
    const reasoning = page.locator('[data-kind="reasoning"]');
    await reasoning.waitFor();
    expect(await reasoning.textContent()).toContain("The user wants my reasoning shown apart.");
    expect(await page.locator('[data-kind="assistant"] .markdown').allInnerTexts()).toEqual(["Here is the answer alone."]);
    const opacity = await reasoning.evaluate((element) => Number(element.ownerDocument.defaultView!.getComputedStyle(element).opacity));
    expect(opacity).toBeLessThan(1);
    // The reasoning line comes before the reply it led to.
    const kinds = await page.locator("[data-kind]").evaluateAll((elements) => elements.map((element) => element.getAttribute("data-kind")));
    expect(kinds.indexOf("reasoning")).toBeLessThan(kinds.lastIndexOf("assistant"));
    await page.context().close();
  });

  it("names a chat in the picker by its first message as it reads, without Markdown", async () => {
    const { page } = await chatPage("titled");
    await say(page, "**Bold** plan with `code` and [a link](https://example.com)");
    await replies(page).filter({ hasText: "echo:" }).waitFor();
    const picker = page.getByLabel("Chat", { exact: true });
    expect(await picker.locator('option[value="titled"]').textContent()).toBe("Bold plan with code and a link");
    // A title kept raw by an earlier version reads the same.
    const older = JSON.stringify([{ id: "older", title: "_fix_ the **build**", updatedAt: new Date().toISOString() }]);
    await page.evaluate(`localStorage.setItem("countbot:chats", ${JSON.stringify(older)})`);
    await page.reload();
    await page.getByText("Connected", { exact: true }).waitFor();
    expect(await picker.locator('option[value="older"]').textContent()).toBe("fix the build");
    await page.context().close();
  });

  it("runs no script from a model reply: sanitized before it reaches the page", async () => {
    // The tripwire counts what reaches it: proven here, so a zero below means something.
    await fetch(`${tripwireUrl}/self-check`);
    expect(tripwireHits.splice(0)).toEqual(["/self-check"]);

    const { page, refused } = await chatPage("evil");
    await say(page, "be evil");
    const reply = replies(page).filter({ hasText: "Evil reply ends here." });
    await reply.waitFor();
    expect(await reply.textContent()).toContain("a javascript link");
    expect(await reply.locator("script, iframe, form, button, [onerror]").count()).toBe(0);
    const hrefs = await reply.locator("a").evaluateAll((links) => links.map((link) => link.getAttribute("href")));
    expect(hrefs.every((href) => href === null || !href.toLowerCase().startsWith("javascript:"))).toBe(true);
    await reply.getByText("a javascript link").click();
    await reply.getByText("a markdown link").click();
    await page.waitForTimeout(500);
    expect(await page.evaluate("window.__countbotPwned")).toBeUndefined();
    expect(tripwireHits).toEqual([]);
    expect(refused).toEqual([]);
    await page.context().close();
  });

  it("sends an attached image that the model sees, and shows it in the chat", async () => {
    const { page } = await chatPage("pictures");
    await page.getByLabel("Attach images").setInputFiles({ name: "dot.png", mimeType: "image/png", buffer: DOT_PNG });
    await page.getByRole("list", { name: "Images to send" }).getByRole("img", { name: "dot.png" }).waitFor();
    await say(page, "what is in the picture?");
    await replies(page).filter({ hasText: "A picture of a single dot." }).waitFor();
    expect(await page.locator('[data-kind="user"] img').count()).toBe(1);
    const request = llm.requests.find((candidate) => lastUserText(candidate.body).includes("what is in the picture?"));
    expect(JSON.stringify(request?.body.messages)).toContain(`data:image/png;base64,${DOT_PNG.toString("base64")}`);
    await page.context().close();
  });

  it("stops the reply being written with /stop (the Stop button), and starts over with /new", async () => {
    const { page } = await chatPage("commands");
    await say(page, "think forever");
    await page.locator('[data-kind="assistant"].streaming').filter({ hasText: "Thinking it over" }).waitFor();
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await replies(page).filter({ hasText: "Stopping." }).waitFor();
    await until(async () => (await page.locator('[data-kind="assistant"].streaming').count()) === 0, "the stopped reply to end");

    await say(page, "/new");
    await page.locator('[data-kind="divider"]').waitFor();
    await replies(page).filter({ hasText: "Started a new conversation." }).waitFor();
    // Read until the reset shows (once, under a full suite's load, a single read right after the
    // reply saw generation 0); a reset that never lands still fails here, with what was read.
    let session: { generation: number; history: unknown[] } | undefined;
    await until(async () => {
      session = await countbot.api<{ generation: number; history: unknown[] }>("/api/sessions/web:commands");
      return session.generation === 1;
    }, "the session's reset to show", 15_000).catch((error: unknown) => {
      throw new Error(`${String(error)}; last read: ${JSON.stringify(session)}`);
    });
    expect(session).toMatchObject({ generation: 1, history: [] });
    await page.context().close();
  });

  it("after a network drop, reconnects and shows what it missed, once", async () => {
    const proxy: TcpProxy = await startTcpProxy({ port: Number(new URL(countbot.base).port) });
    try {
      const { page } = await chatPage("dropped", { base: proxy.url });
      await say(page, "first question");
      await replies(page).filter({ hasText: "echo: first question" }).waitFor();

      await say(page, "hold on a moment");
      await until(() => llm.requests.some((request) => lastUserText(request.body).includes("hold on a moment")), "the model to be asked");
      proxy.refuse();
      proxy.cut();
      await page.getByText("Connection lost: reconnecting…").waitFor();
      heldAnswer.open();
      // The reply is written while the page cannot hear it.
      await until(async () => (await countbot.api<{ history: Array<{ content: string }> }>("/api/sessions/web:dropped")).history.some((entry) => entry.content === "The held answer."), "the reply to be saved");
      expect(await replies(page).filter({ hasText: "The held answer." }).count()).toBe(0);

      proxy.accept();
      await page.getByText("Connected", { exact: true }).waitFor({ timeout: 15_000 });
      await replies(page).filter({ hasText: "The held answer." }).waitFor();
      await page.waitForTimeout(500);
      expect(await replies(page).filter({ hasText: "The held answer." }).count()).toBe(1);
      expect(await replies(page).filter({ hasText: "echo: first question" }).count()).toBe(1);

      // A reload resumes from the kept transcript and seq: nothing comes twice.
      await page.reload();
      await page.getByText("Connected", { exact: true }).waitFor();
      await page.waitForTimeout(500);
      expect(await page.locator('[data-kind="assistant"] .markdown').allInnerTexts()).toEqual(["echo: first question", "The held answer."]);
      await page.context().close();
    } finally {
      await proxy.close();
    }
  });
});

describe("a long chat", () => {
  it("keeps the newest reply in view as the transcript fills, without any scrolling", async () => {
    const { page } = await chatPage("long", { width: 900, height: 640 });
    /** Whether the newest reply's end is inside the transcript's visible part. */
    const newestInView = () =>
      page.evaluate(`(() => {
        const transcript = document.querySelector(".transcript").getBoundingClientRect();
        const newest = [...document.querySelectorAll('[data-kind="assistant"]')].at(-1).getBoundingClientRect();
        return newest.bottom <= transcript.bottom + 1 && newest.bottom > transcript.top;
      })()`) as Promise<boolean>;
    for (let exchange = 1; exchange <= 12; exchange++) {
      await say(page, `exchange ${exchange}`);
      await replies(page).filter({ hasText: `Answer ${exchange} ends here.` }).waitFor();
      // Following is done a frame after the reply lands; one that stopped following never gets there.
      await until(newestInView, `reply ${exchange} to be in view`, 3_000);
    }
    const overflow = (await page.evaluate(`(() => {
      const transcript = document.querySelector(".transcript");
      return transcript.scrollHeight - transcript.clientHeight;
    })()`)) as number;
    // The transcript is full (the test would prove nothing otherwise).
    expect(overflow).toBeGreaterThan(500);
    await page.context().close();
  });
});

describe("every view", () => {
  it("fits a phone's width, labels every form field, and can be reached by keyboard", async () => {
    const { page } = await chatPage("phone", { width: 390, height: 844 });
    await say(page, "hello from a phone");
    await replies(page).filter({ hasText: "echo: hello from a phone" }).waitFor();
    await screenshot(page, "chat-phone");
    // Every view's link shows whole: none is cut off by the window or hidden in a scrolled strip.
    const clipped = await page.evaluate(`(() => {
      const nav = document.querySelector('nav[aria-label="Views"]');
      const box = nav.getBoundingClientRect();
      return [...nav.querySelectorAll("a")]
        .filter((link) => {
          const own = link.getBoundingClientRect();
          return own.left < box.left - 0.5 || own.right > box.right + 0.5 || own.right > window.innerWidth || own.width === 0;
        })
        .map((link) => link.textContent);
    })()`);
    expect(clipped).toEqual([]);
    for (const view of ["chat", "tasks", "teams", "teams/new", "runs", "runs/new", "sessions", "operations"]) {
      await page.goto(`${countbot.base}/#/${view}`);
      await page.locator("main h1").first().waitFor();
      await page.waitForTimeout(150);
      expect(await unlabelledFields(page), view).toEqual([]);
      expect(await overflowWidth(page), view).toBeLessThanOrEqual(0);
    }

    // The views' navigation by keyboard: Tab to a link, Enter follows it.
    await page.goto(`${countbot.base}/#/chat/phone`);
    await page.getByLabel("Message", { exact: true }).waitFor();
    await page.getByRole("link", { name: "Chat" }).focus();
    await page.keyboard.press("Tab");
    expect(await page.evaluate("document.activeElement?.textContent")).toBe("Tasks");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Tasks" }).waitFor();
    expect(await page.evaluate("location.hash")).toBe("#/tasks");
    await page.context().close();
  });
});
