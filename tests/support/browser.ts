/**
 * Headless Chromium for the web console's end-to-end tests: Debian's `chromium` package driven by
 * playwright-core (`.ci/run` installs it when missing). Pages reach loopback only: host names do
 * not resolve (but 127.0.0.1), Chromium's background services are off, and a context aborts, and
 * records, any request a page makes to another host.
 */
import { existsSync } from "node:fs";
import { type Browser, type BrowserContext, chromium } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; .ci/run does)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-domain-reliability",
      "--dns-prefetch-disable",
      "--no-pings",
    ],
  });
}

export interface LoopbackContext {
  context: BrowserContext;
  /** Requests a page tried to send beyond loopback (aborted). */
  refused: string[];
}

export async function loopbackContext(browser: Browser, options: { width?: number; height?: number } = {}): Promise<LoopbackContext> {
  const context = await browser.newContext({ viewport: { width: options.width ?? 1280, height: options.height ?? 800 }, serviceWorkers: "block" });
  const refused: string[] = [];
  await context.route(
    (url) => !["127.0.0.1", "localhost", "[::1]"].includes(url.hostname) && url.protocol !== "data:",
    (route) => {
      refused.push(route.request().url());
      return route.abort("blockedbyclient");
    },
  );
  return { context, refused };
}
