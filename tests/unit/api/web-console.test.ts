/**
 * The web console's files through a real listening server: public (the login page loads before a
 * cookie exists) while the API stays behind the token, with content types and caching right; a
 * missing build is one warning and a page that says how to build it. And the browser's login:
 * the JSON form, logout, and a CSP the console can live under.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createApiServer } from "../../../src/api/server.js";
import { registerWebConsole } from "../../../src/api/web-console.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";

const TOKEN = "console-test-token-0123456789";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A log sink that keeps every record. */
function recordingLogger() {
  const records: Array<Record<string, unknown>> = [];
  const logger = pino({ level: "info" }, { write: (line: string) => void records.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, records };
}

async function start(options: { build: boolean }) {
  const root = await mkdtemp(path.join(tmpdir(), "countbot-console-"));
  cleanups.push(() => rm(root, { recursive: true, force: true }));
  const directory = path.join(root, "dist");
  if (options.build) {
    await mkdir(path.join(directory, "assets"), { recursive: true });
    await writeFile(path.join(directory, "index.html"), '<!doctype html><title>CountBot</title><script type="module" src="/assets/index-abc123.js"></script>');
    await writeFile(path.join(directory, "assets", "index-abc123.js"), "console.log('console');");
    await writeFile(path.join(directory, "assets", "index-def456.css"), "body { margin: 0 }");
  }
  const { logger, records } = recordingLogger();
  const bus = createMemoryBus();
  cleanups.push(() => bus.close());
  const server = createApiServer({
    bus,
    config: { host: "127.0.0.1", port: 0, token: TOKEN },
    logger,
    readiness: async () => ({ ready: true, checks: {} }),
    site: (app) => void registerWebConsole(app, { directory, buildCommand: "npm run build:web", logger }),
    routes: [(scope) => scope.get("/api/secret", async () => ({ secret: true }))],
  });
  cleanups.push(() => server.close());
  const { url } = await server.listen();
  return { url, records };
}

describe("the web console's files", () => {
  it("serves the page and its assets without a token, the API still behind it", async () => {
    const { url } = await start({ build: true });
    const page = await fetch(`${url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("cache-control")).toBe("no-cache");
    expect(await page.text()).toContain("/assets/index-abc123.js");
    expect((await fetch(`${url}/index.html`)).status).toBe(200);

    const script = await fetch(`${url}/assets/index-abc123.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toMatch(/^text\/javascript|^application\/javascript/);
    expect(script.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    const style = await fetch(`${url}/assets/index-def456.css`);
    expect(style.headers.get("content-type")).toMatch(/^text\/css/);

    // A revalidation of the page is answered 304 by its ETag (fetch would add `no-cache`; a browser sends max-age=0).
    const etag = page.headers.get("etag");
    expect(etag).toBeTruthy();
    expect((await fetch(`${url}/`, { headers: { "if-none-match": etag!, "cache-control": "max-age=0" } })).status).toBe(304);

    expect((await fetch(`${url}/api/secret`)).status).toBe(401);
    expect((await fetch(`${url}/api/secret`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
  });

  it("serves only the files of the build: other paths are the API's (401 without the token, JSON 404 with it), none outside the directory", async () => {
    const { url } = await start({ build: true });
    for (const route of ["/assets/missing.js", "/nothing", "/assets/..%2f..%2fpackage.json", "/..%2fdist%2findex.html", "/assets/../../package.json"]) {
      expect((await fetch(`${url}${route}`)).status, route).toBe(401);
      const response = await fetch(`${url}${route}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(response.status, route).toBe(404);
      expect(response.headers.get("content-type"), route).toContain("application/json");
    }
  });

  it("sends the security headers with the page, and a CSP that loads its own scripts only", async () => {
    const { url } = await start({ build: true });
    const page = await fetch(`${url}/`);
    const policy = page.headers.get("content-security-policy") ?? "";
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain("default-src 'self'");
    // Plain HTTP on a LAN address must not be sent to https, and nothing is fetched from elsewhere.
    expect(policy).not.toContain("upgrade-insecure-requests");
    expect(policy).toContain("style-src 'self' 'unsafe-inline'");
    expect(policy).not.toContain("https:");
    expect(page.headers.get("x-content-type-options")).toBe("nosniff");
  });

  it("without a build, logs one line saying how to build it and answers / with a page that says so", async () => {
    const { url, records } = await start({ build: false });
    const warnings = records.filter((record) => String(record.msg).includes("web console not built"));
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0]!.msg)).toContain("npm run build:web");
    const page = await fetch(`${url}/`);
    expect(page.status).toBe(503);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(await page.text()).toContain("npm run build:web");
    expect((await fetch(`${url}/health`)).status).toBe(200);
  });
});

describe("the browser's login", () => {
  const postJson = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

  it("turns the token posted as JSON into the HttpOnly cookie the API takes, and logs out", async () => {
    const { url } = await start({ build: true });
    const wrong = await postJson(`${url}/login`, { token: "wrong" });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("set-cookie")).toBeNull();
    expect((await postJson(`${url}/login`, {})).status).toBe(400);

    const login = await postJson(`${url}/login`, { token: TOKEN }, { origin: url });
    expect(login.status).toBe(204);
    const cookie = login.headers.get("set-cookie") ?? "";
    expect(cookie).toMatch(/^countbot_token=[^;]+; HttpOnly; SameSite=Strict; Path=\/; Max-Age=2592000$/);
    expect((await fetch(`${url}/api/secret`, { headers: { cookie: cookie.split(";")[0]! } })).status).toBe(200);

    const logout = await fetch(`${url}/logout`, { method: "POST", headers: { origin: url } });
    expect(logout.status).toBe(204);
    expect(logout.headers.get("set-cookie")).toMatch(/^countbot_token=; HttpOnly; SameSite=Strict; Path=\/; Max-Age=0$/);
  });

  it("refuses a login posted by another site's page", async () => {
    const { url } = await start({ build: true });
    const response = await postJson(`${url}/login`, { token: TOKEN }, { origin: "https://evil.example" });
    expect(response.status).toBe(403);
    expect(response.headers.get("set-cookie")).toBeNull();
  });
});
