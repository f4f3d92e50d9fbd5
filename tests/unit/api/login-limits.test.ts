/**
 * Failed sign-in attempts are limited per client address and for the whole API, whichever way the
 * token comes (`POST /login`, `GET /login?token=`, a Bearer header, the cookie): past the limit a
 * request gets 429 with Retry-After before its token is compared, and the limit is logged once per
 * window. `api.trustProxy` decides whose X-Forwarded-For and X-Forwarded-Proto are believed; a
 * configured `api.token` shorter than 24 characters is refused at config load.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { type ApiServerConfig, createApiServer } from "../../../src/api/server.js";
import { resolveApiToken } from "../../../src/app/api-token.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import { loadConfig } from "../../../src/config/load.js";
import { ConfigError } from "../../../src/errors.js";

const TOKEN = "login-limits-token-0123456789";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function start(config: Partial<ApiServerConfig> = {}) {
  const bus = createMemoryBus();
  cleanups.push(() => bus.close());
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const server = createApiServer({
    bus,
    config: { host: "127.0.0.1", port: 0, token: TOKEN, loginLimits: { perClient: 5, global: 12 }, ...config },
    logger: pino({ level: "warn" }, sink),
    readiness: async () => ({ ready: true, checks: {} }),
    routes: [(scope) => scope.get("/api/ping", async () => ({ pong: true }))],
  });
  cleanups.push(() => server.close());
  const { url } = await server.listen();
  const limitLogs = () => lines.filter((line) => String(line.msg).includes("reached the limit"));
  return { url, limitLogs };
}

const asJson = (token: string, headers: Record<string, string> = {}): RequestInit => ({ method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ token }), redirect: "manual" });

describe("sign-in attempt limits", () => {
  it("counts every spelling of a wrong token from one address, then answers 429 with Retry-After even for the right token", async () => {
    const { url, limitLogs } = await start();
    const wrong = [
      () => fetch(`${url}/login`, asJson("wrong-1")),
      () => fetch(`${url}/login?token=wrong-2`, { redirect: "manual" }),
      () => fetch(`${url}/api/ping`, { headers: { authorization: "Bearer wrong-3" } }),
      () => fetch(`${url}/api/ping`, { headers: { cookie: "countbot_token=wrong-4" } }),
      () => fetch(`${url}/login`, asJson("wrong-5")),
    ];
    for (const attempt of wrong) expect((await attempt()).status).toBe(401);
    for (const attempt of [() => fetch(`${url}/login`, asJson(TOKEN)), () => fetch(`${url}/api/ping`, { headers: { authorization: `Bearer ${TOKEN}` } }), () => fetch(`${url}/login?token=${TOKEN}`, { redirect: "manual" })]) {
      const refused = await attempt();
      expect(refused.status).toBe(429);
      const retryAfter = Number(refused.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(((await refused.json()) as { error: string }).error).toMatch(/^too many failed sign-in attempts from this address: try again in \d+ s$/);
    }
    expect(limitLogs()).toHaveLength(1);
    expect(limitLogs()[0]).toMatchObject({ level: 40, limit: "client", client: "127.0.0.1", failures: 5 });
    // A request without any token is no attempt: it gets its 401, not a 429.
    expect((await fetch(`${url}/api/ping`)).status).toBe(401);
  });

  it("holds a burst of guesses at the limit: of 60 at once, 5 are compared and the rest refused", async () => {
    const { url, limitLogs } = await start();
    const answers = await Promise.all(Array.from({ length: 60 }, (_, index) => fetch(`${url}/api/ping`, { headers: { authorization: `Bearer guess-${index}` } })));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 401)).toHaveLength(5);
    expect(statuses.filter((status) => status === 429)).toHaveLength(55);
    expect(limitLogs()).toHaveLength(1);
  });

  it("limits all addresses together (behind a trusted proxy), but lets a client that signed in recently through", async () => {
    const { url, limitLogs } = await start({ trustProxy: ["127.0.0.1"] });
    const from = (address: string) => ({ "x-forwarded-for": address });
    expect((await fetch(`${url}/login`, asJson(TOKEN, from("198.51.100.7")))).status).toBe(204);
    for (let index = 0; index < 12; index += 1) expect((await fetch(`${url}/login`, asJson("wrong", from(`203.0.113.${index}`)))).status).toBe(401);
    const stranger = await fetch(`${url}/login`, asJson(TOKEN, from("192.0.2.99")));
    expect(stranger.status).toBe(429);
    expect(((await stranger.json()) as { error: string }).error).toMatch(/^too many failed sign-in attempts in all: try again in \d+ s$/);
    expect((await fetch(`${url}/api/ping`, { headers: { authorization: `Bearer ${TOKEN}`, ...from("198.51.100.7") } })).status).toBe(200);
    expect(limitLogs().map((line) => line.limit)).toEqual(["global"]);
  });

  it("counts the addresses of one IPv6 /64 as one client", async () => {
    const { url } = await start({ trustProxy: ["127.0.0.1"] });
    for (let index = 1; index <= 5; index += 1) expect((await fetch(`${url}/login`, asJson("wrong", { "x-forwarded-for": `2001:db8:1:2::${index}` }))).status).toBe(401);
    expect((await fetch(`${url}/login`, asJson(TOKEN, { "x-forwarded-for": "2001:db8:1:2:ffff::9" }))).status).toBe(429);
    expect((await fetch(`${url}/login`, asJson(TOKEN, { "x-forwarded-for": "2001:db8:1:3::1" }))).status).toBe(204);
  });

  it("believes X-Forwarded-For and X-Forwarded-Proto only from a configured proxy: the cookie is Secure behind an HTTPS proxy", async () => {
    const untrusted = await start();
    for (let index = 0; index < 5; index += 1) await fetch(`${untrusted.url}/login`, asJson("wrong", { "x-forwarded-for": `203.0.113.${index}` }));
    // All five came from 127.0.0.1 whatever the header said.
    expect((await fetch(`${untrusted.url}/login`, asJson(TOKEN, { "x-forwarded-for": "192.0.2.1" }))).status).toBe(429);

    const direct = await start();
    const plain = await fetch(`${direct.url}/login`, asJson(TOKEN, { "x-forwarded-proto": "https" }));
    expect(plain.headers.get("set-cookie")).not.toContain("Secure");

    const proxied = await start({ trustProxy: ["127.0.0.0/8"] });
    const secure = await fetch(`${proxied.url}/login`, asJson(TOKEN, { "x-forwarded-proto": "https" }));
    expect(secure.status).toBe(204);
    expect(secure.headers.get("set-cookie")).toMatch(/; Secure$/);
    const viaGet = await fetch(`${proxied.url}/login?token=${TOKEN}`, { redirect: "manual", headers: { "x-forwarded-proto": "https" } });
    expect(viaGet.headers.get("set-cookie")).toMatch(/; Secure$/);
  });
});

describe("api.token length and api.trustProxy at config load", () => {
  function loadWith(content: unknown, env: Record<string, string> = {}) {
    const root = mkdtempSync(path.join(tmpdir(), "countbot-token-length-"));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    mkdirSync(path.join(root, "config"));
    writeFileSync(path.join(root, "config", "countbot.json"), JSON.stringify(content));
    return () => loadConfig({ env: { COUNTBOT_DATA_DIR: path.join(root, "data"), ...env }, cwd: root, homeDir: root, channels: [] });
  }

  it("refuses a token under 24 characters from the file or COUNTBOT_API_TOKEN, naming both, without printing it", () => {
    for (const load of [loadWith({ api: { token: "short-token-123" } }), loadWith({}, { COUNTBOT_API_TOKEN: "short-token-123" })]) {
      let error: unknown;
      try {
        load();
      } catch (thrown) {
        error = thrown;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(/api\.token: at least 24 characters: a shorter token can be guessed \(set api\.token or COUNTBOT_API_TOKEN/);
      expect((error as Error).message).not.toContain("short-token-123");
    }
  });

  it("takes a long token, an unset one, the generated one, and proxies as addresses or ranges only", () => {
    expect(loadWith({ api: { token: TOKEN } })().api.token).toBe(TOKEN);
    expect(loadWith({ api: { token: "${UNSET_TOKEN}" } })().api.token ?? "").toBe("");
    const config = loadWith({})();
    const generated = resolveApiToken(config);
    expect(loadWith({ api: { token: generated.token } })().api.token).toBe(generated.token);
    expect(loadWith({ api: { trustProxy: ["10.0.0.5", "10.0.0.0/8", "fd00::/8"] } })().api.trustProxy).toEqual(["10.0.0.5", "10.0.0.0/8", "fd00::/8"]);
    expect(() => loadWith({ api: { trustProxy: ["proxy.example"] } })()).toThrow(/api\.trustProxy\[0\]: expected an IP address or a CIDR range/);
    expect(() => loadWith({ api: { trustProxy: ["10.0.0.0/33"] } })()).toThrow(/api\.trustProxy\[0\]/);
  });
});
