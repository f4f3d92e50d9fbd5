/**
 * What the web console's browser tests share: signing a page in by the token cookie, screenshots
 * for the README (docs/screenshots), gates a test opens to hold a fake model's answer, polling,
 * and the checks every view must pass (each form field labelled, nothing wider than the screen).
 */
import { mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
/**
 * Where the tests save each view: the README's docs/screenshots with `UPDATE_SCREENSHOTS=1`, else a
 * temp folder (a plain `npm test` leaves the checkout as it was).
 */
export const SCREENSHOT_DIRECTORY = process.env.UPDATE_SCREENSHOTS === "1" ? path.join(projectRoot, "docs", "screenshots") : path.join(tmpdir(), "countbot-screenshots");

/** Saves what the page shows as <SCREENSHOT_DIRECTORY>/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(SCREENSHOT_DIRECTORY, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIRECTORY, `${name}.png`) });
}

/** Signs the page in the way `countbot start`'s login link does (the cookie), and waits for the console. */
export async function signIn(page: Page, base: string, token: string, view = "chat"): Promise<void> {
  await page.goto(`${base}/login?token=${encodeURIComponent(token)}`);
  await page.getByRole("navigation", { name: "Views" }).waitFor();
  if (view !== "chat") await page.goto(`${base}/#/${view}`);
}

export interface Gate {
  promise: Promise<void>;
  open(): void;
}

const gates: Array<() => void> = [];

/** A promise the test resolves (a model answer held until then). */
export function gate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  gates.push(open);
  return { promise, open };
}

/** Opens every gate, so no held response outlives the file. */
export function openAllGates(): void {
  for (const open of gates.splice(0)) open();
}

export async function until<T>(probe: () => T | undefined | false | Promise<T | undefined | false>, what: string, limitMs = 15_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The form controls of the page that have no accessible name (label, aria-label or aria-labelledby). Run in the page. */
const UNLABELLED_FIELDS = `[...document.querySelectorAll("input, select, textarea")]
  .filter((field) => field.type !== "hidden")
  .filter((field) => (field.labels?.length ?? 0) === 0 && !field.getAttribute("aria-label") && !field.getAttribute("aria-labelledby"))
  .map((field) => field.outerHTML.slice(0, 120))`;

export function unlabelledFields(page: Page): Promise<string[]> {
  return page.evaluate(UNLABELLED_FIELDS) as Promise<string[]>;
}

/** How many pixels the page is wider than its window (0 when nothing sticks out). */
export function overflowWidth(page: Page): Promise<number> {
  return page.evaluate("document.documentElement.scrollWidth - window.innerWidth") as Promise<number>;
}

/** The text of the last user message of a Chat Completions request (its text part when it has images). */
export function lastUserText(body: Record<string, unknown>): string {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const last = messages.filter((message) => message.role === "user").at(-1);
  if (!last) return "";
  if (typeof last.content === "string") return last.content;
  return (last.content as Array<{ type: string; text?: string }>)
    .filter((part) => part.type === "text")
    .map((part) => part.text ?? "")
    .join("\n");
}
