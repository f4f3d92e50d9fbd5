/**
 * The MCP client against real MCP servers written with the SDK (tests/support/mcp-*-server.ts):
 * one started on stdio with node, one on streamable HTTP on 127.0.0.1. Tool listing and naming,
 * calls, argument validation before the call, crashes and restarts, timeouts, the minimal
 * environment, servers that never come up, and the address guard for HTTP servers (proven
 * against a loopback tripwire that must see no connection).
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { McpServerConfig } from "../../../src/config/mcp.js";
import { McpServers } from "../../../src/tools/mcp/mcp-servers.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import { testTools } from "../../support/mcp-test-server.js";
import { type McpHttpServer, startMcpHttpServer, startTripwire } from "../../support/mcp-http-server.js";
import { eventually, httpServer, recordingLogger, stdioServer, toolContext, unwrapped } from "../../support/mcp-fixtures.js";

let root: string;
const closers: Array<() => Promise<unknown>> = [];

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-mcp-"));
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  vi.unstubAllEnvs();
  await rm(root, { recursive: true, force: true });
});

interface Setup {
  mcp: McpServers;
  registry: ToolRegistry;
  records: ReturnType<typeof recordingLogger>["records"];
  call(name: string, args?: Record<string, unknown>): ReturnType<ToolRegistry["execute"]>;
}

async function setup(servers: Record<string, McpServerConfig>, extra: Partial<ConstructorParameters<typeof McpServers>[0]> = {}): Promise<Setup> {
  const { logger, records } = recordingLogger();
  const mcp = new McpServers({ servers, allowedHosts: [], workspace: root, logger, backoff: { initialMs: 20, maxMs: 100 }, ...extra });
  closers.push(() => mcp.close());
  const registry = new ToolRegistry();
  const source = mcp.toolSource("agent");
  if (source) registry.addSource(source);
  await registry.load();
  let sequence = 0;
  return {
    mcp,
    registry,
    records,
    call: async (name, args = {}) => {
      await registry.load();
      return registry.execute({ id: `call-${++sequence}`, name, arguments: JSON.stringify(args) }, toolContext(root));
    },
  };
}

describe("a stdio MCP server", () => {
  it("offers its tools under sanitized names, with their JSON Schemas passed through", async () => {
    const { registry } = await setup({ local: stdioServer() });
    expect(registry.names()).toEqual(["mcp_local_echo", "mcp_local_add", "mcp_local_environment", "mcp_local_pid", "mcp_local_crash", "mcp_local_hang", "mcp_local_fail", "mcp_local_fetch_page"]);
    const add = registry.definitions().find((definition) => definition.name === "mcp_local_add")!;
    const { $schema: _dialect, ...schema } = testTools.find((tool) => tool.name === "add")!.inputSchema as Record<string, unknown>;
    expect(add.parameters).toEqual(schema);
    expect(add.description).toBe('Adds two whole numbers. (from the MCP server "local")');
  });

  it("calls a tool and hands back its answer as untrusted data", async () => {
    const { call } = await setup({ local: stdioServer() });
    const outcome = await call("mcp_local_echo", { text: "hello there" });
    expect(outcome.success).toBe(true);
    expect(outcome.content).toContain('untrusted data from the MCP server "local"');
    expect(unwrapped(outcome.content)).toBe("echo: hello there");
    expect(unwrapped((await call("mcp_local_fetch_page", { url: "https://example.com" })).content)).toBe("page at https://example.com");
  });

  it("rejects invalid arguments before the call, naming the field, and never reaches the server", async () => {
    const callLog = path.join(root, "calls.log");
    await writeFile(callLog, "");
    const { call } = await setup({ local: stdioServer({ env: { MCP_TEST_CALL_LOG: callLog } }) });
    const wrongType = await call("mcp_local_add", { a: "one", b: 2 });
    expect(wrongType.success).toBe(false);
    expect(wrongType.content).toBe("Error: invalid arguments for mcp_local_add: `a`: must be integer. Next: Call mcp_local_add again with the arguments fixed.");
    const missing = await call("mcp_local_add", { a: 1 });
    expect(missing.content).toContain("`b`: is required but missing");
    const unknown = await call("mcp_local_add", { a: 1, b: 2, c: 3 });
    expect(unknown.content).toContain("arguments: unknown field `c`");
    expect(await readFile(callLog, "utf8")).toBe("");
    // The usual model quirk: a null for a field it means to leave out is forgiven.
    const fine = await call("mcp_local_add", { a: 1, b: 2, c: null });
    expect(unwrapped(fine.content)).toBe("3");
    expect(await readFile(callLog, "utf8")).toBe('add {"a":1,"b":2}\n');
  });

  it("turns a reported failure into a tool error the model can read", async () => {
    const { call } = await setup({ local: stdioServer() });
    const outcome = await call("mcp_local_fail");
    expect(outcome.success).toBe(false);
    expect(outcome.content).toMatch(/^Error: the tool fail of the MCP server "local" reported a failure\./);
    expect(unwrapped(outcome.content)).toBe("the disk is full");
  });

  it("fails the call the server died in, and restarts it on the next call", async () => {
    const { call, mcp, records } = await setup({ local: stdioServer() });
    const first = Number(unwrapped((await call("mcp_local_pid")).content));
    const crash = await call("mcp_local_crash");
    expect(crash.success).toBe(false);
    expect(crash.content).toContain('the MCP server "local" went away during the call of crash');
    expect(crash.content).toContain("It is restarted on the next call");
    const second = await call("mcp_local_pid");
    expect(second.success).toBe(true);
    const restarted = Number(unwrapped(second.content));
    expect(restarted).not.toBe(first);
    expect(() => process.kill(first, 0)).toThrow();
    expect(mcp.status()[0]!.state).toBe("ready");
    expect(records().some((record) => String(record.msg).includes('MCP server "local" went away'))).toBe(true);
  });

  it("restarts a server killed between calls before the next call, which then works", async () => {
    const { call, mcp } = await setup({ local: stdioServer() });
    const first = Number(unwrapped((await call("mcp_local_pid")).content));
    process.kill(first, "SIGKILL");
    await eventually(() => mcp.status()[0]!.state === "down", "the server to be seen down");
    const outcome = await call("mcp_local_echo", { text: "still here" });
    expect(outcome.success).toBe(true);
    expect(unwrapped(outcome.content)).toBe("echo: still here");
    expect(Number(unwrapped((await call("mcp_local_pid")).content))).not.toBe(first);
  });

  it("times a hanging call out as a tool error, and the connection goes on serving", async () => {
    const { call } = await setup({ local: stdioServer({ callTimeoutMs: 300 }) });
    const outcome = await call("mcp_local_hang");
    expect(outcome.success).toBe(false);
    expect(outcome.content).toContain("hang on the MCP server \"local\" did not answer within 300 ms");
    expect(outcome.retryable).toBe(false);
    expect(unwrapped((await call("mcp_local_echo", { text: "after" })).content)).toBe("echo: after");
  });

  it("starts the server with PATH and its configured variables, never this process's API keys", async () => {
    vi.stubEnv("OPENAI_API_KEY", "sk-must-not-leak-0123456789");
    vi.stubEnv("COUNTBOT_API_TOKEN", "token-must-not-leak");
    const { call } = await setup({ local: stdioServer({ env: { MCP_TEST_TOKEN: "for-the-server" } }) });
    const environment = JSON.parse(unwrapped((await call("mcp_local_environment")).content)) as Record<string, string>;
    expect(environment.MCP_TEST_TOKEN).toBe("for-the-server");
    expect(environment.PATH).toBe(process.env.PATH);
    expect(environment).not.toHaveProperty("OPENAI_API_KEY");
    expect(environment).not.toHaveProperty("COUNTBOT_API_TOKEN");
    expect(JSON.stringify(environment)).not.toContain("must-not-leak");
    // Besides what the SDK keeps like sudo does (HOME, USER, ...), nothing else comes through.
    expect(Object.keys(environment).filter((name) => !["PATH", "MCP_TEST_TOKEN", "HOME", "LOGNAME", "SHELL", "TERM", "USER"].includes(name))).toEqual([]);
  });

  it("offers only the tools named in enabledTools", async () => {
    const { registry } = await setup({ local: stdioServer({ enabledTools: ["echo", "pid"] }) });
    expect(registry.names()).toEqual(["mcp_local_echo", "mcp_local_pid"]);
  });
});

describe("a reload (SIGHUP) of the MCP servers", () => {
  it("connects an added server, closes a removed one, replaces a changed one and keeps the rest running", async () => {
    const { mcp, registry, call } = await setup({ kept: stdioServer(), dropped: stdioServer(), changed: stdioServer() });
    const pidOf = async (server: string) => Number(unwrapped((await call(`mcp_${server}_pid`)).content));
    const [kept, dropped, changed] = [await pidOf("kept"), await pidOf("dropped"), await pidOf("changed")];

    const outcome = await mcp.reconfigure({ kept: stdioServer(), changed: stdioServer({ callTimeoutMs: 30_000 }), added: stdioServer() }, []);
    expect(outcome).toEqual({ added: ["added"], removed: ["dropped"], replaced: ["changed"] });
    // The registry the turns use sees the new set at its next load.
    await registry.load();
    const names = registry.names();
    expect(names.filter((name) => name.endsWith("_pid")).sort()).toEqual(["mcp_added_pid", "mcp_changed_pid", "mcp_kept_pid"]);
    expect(await pidOf("kept")).toBe(kept);
    expect(await pidOf("changed")).not.toBe(changed);
    expect((await call("mcp_added_echo", { text: "new here" })).success).toBe(true);
    // The removed and the replaced servers' processes are gone.
    const gone = (pid: number) => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    };
    await eventually(() => gone(dropped) && gone(changed), "the removed and the replaced servers to exit");
    expect(() => process.kill(kept, 0)).not.toThrow();
  });
});

describe("a server that never comes up", () => {
  it("is logged once and its tools are left out, while the other servers work", async () => {
    let clock = 0;
    const { registry, call, mcp, records } = await setup(
      {
        broken: stdioServer({ env: { MCP_TEST_EXIT_AT_START: "4", MCP_TEST_STDERR: "missing credentials for the test" } }),
        local: stdioServer(),
      },
      { now: () => clock, backoff: { initialMs: 1_000, maxMs: 4_000 } },
    );
    expect(registry.names().every((name) => name.startsWith("mcp_local_"))).toBe(true);
    const broken = mcp.status().find((status) => status.name === "broken")!;
    expect(broken.state).toBe("down");
    expect(broken.error).toContain("missing credentials for the test");
    expect(unwrapped((await call("mcp_local_echo", { text: "fine" })).content)).toBe("echo: fine");
    expect(broken.retryInMs).toBe(1_000);
    // Turns before the backoff is over do not try it; later ones do, in the background, without another warning.
    await registry.load();
    expect(records().filter((record) => record.msg === "MCP server still down")).toHaveLength(0);
    for (let retry = 1; retry <= 2; retry += 1) {
      clock += 5_000;
      await registry.load();
      await eventually(() => records().filter((record) => record.msg === "MCP server still down").length === retry, `retry ${retry}`);
    }
    expect(mcp.status().find((status) => status.name === "broken")!.retryInMs).toBe(4_000);
    const warnings = records().filter((record) => String(record.msg).includes('"broken" did not come up'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.level).toBe(40);
    expect(registry.names().some((name) => name.startsWith("mcp_broken_"))).toBe(false);
  });

  it("counts as down when it does not answer within connectTimeoutMs, and is not left running", async () => {
    const pidFile = path.join(root, "pid");
    const silent = stdioServer({ connectTimeoutMs: 400 });
    const config: McpServerConfig = { ...silent, args: ["-e", `require("fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`] };
    const { mcp, registry } = await setup({ silent: config });
    expect(registry.names()).toEqual([]);
    const status = mcp.status()[0]!;
    expect(status.state).toBe("down");
    expect(status.error).toBe("did not answer within 400 ms");
    const pid = Number(await readFile(pidFile, "utf8"));
    await eventually(() => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    }, "the silent server to be stopped");
  });

  it("reports a program that does not exist", async () => {
    const { mcp } = await setup({ missing: stdioServer({ command: path.join(root, "no-such-server") }) });
    expect(mcp.status()[0]!.error).toContain("ENOENT");
  });
});

describe("a streamable HTTP MCP server", () => {
  let server: McpHttpServer;

  beforeEach(async () => {
    server = await startMcpHttpServer();
    closers.push(() => server.close());
  });

  it("is reached when its host is allowed, with the configured headers", async () => {
    const { call, registry } = await setup({ remote: httpServer(server.url, { headers: { Authorization: "Bearer remote-secret" } }) }, { allowedHosts: ["127.0.0.1"] });
    expect(registry.names()).toContain("mcp_remote_echo");
    expect(unwrapped((await call("mcp_remote_echo", { text: "over http" })).content)).toBe("echo: over http");
    expect(server.calls).toEqual([{ tool: "echo", arguments: { text: "over http" } }]);
    expect(server.requestHeaders.every((headers) => headers.authorization === "Bearer remote-secret")).toBe(true);
  });

  it("reconnects when the server forgot the session, and the call goes through", async () => {
    const { call } = await setup({ remote: httpServer(server.url) }, { allowedHosts: ["127.0.0.1"] });
    expect(unwrapped((await call("mcp_remote_echo", { text: "one" })).content)).toBe("echo: one");
    await server.forgetSessions();
    const outcome = await call("mcp_remote_echo", { text: "two" });
    expect(outcome.success).toBe(true);
    expect(unwrapped(outcome.content)).toBe("echo: two");
    expect(server.sessionsStarted()).toBe(2);
  });

  it("is reconnected, with backoff, after it was gone", async () => {
    let clock = 0;
    const { call, mcp } = await setup({ remote: httpServer(server.url) }, { allowedHosts: ["127.0.0.1"], now: () => clock, backoff: { initialMs: 1_000, maxMs: 8_000 } });
    expect(unwrapped((await call("mcp_remote_echo", { text: "before" })).content)).toBe("echo: before");
    await server.close();
    // The first call finds it gone (on the kept-alive connection, or when connecting again) ...
    const gone = await call("mcp_remote_echo", { text: "while gone" });
    expect(gone.success).toBe(false);
    expect(gone.content).toMatch(/the MCP server "remote" (went away during the call of echo|is not available)/);
    // ... and once an attempt to reconnect failed, calls wait out the backoff.
    const waiting = await call("mcp_remote_echo", { text: "still gone" });
    expect(waiting.content).toContain('the MCP server "remote" is not available');
    expect(waiting.content).toContain("tried again in about 1 s");
    expect(mcp.status()[0]).toMatchObject({ state: "down", retryInMs: 1_000 });
    // Back on the same port: within the backoff the call is not tried, after it the client reconnects.
    server = await startMcpHttpServer({ port: server.port });
    closers.push(() => server.close());
    expect((await call("mcp_remote_echo", { text: "too soon" })).content).toContain("is not available");
    expect(server.calls).toEqual([]);
    clock += 1_000;
    const back = await call("mcp_remote_echo", { text: "back" });
    expect(unwrapped(back.content)).toBe("echo: back");
    expect(server.calls).toEqual([{ tool: "echo", arguments: { text: "back" } }]);
  });

  it("is reached over the older HTTP+SSE transport too", async () => {
    const { call, registry } = await setup({ legacy: httpServer(server.sseUrl, { transport: "sse" }) }, { allowedHosts: ["127.0.0.1"] });
    expect(registry.names()).toContain("mcp_legacy_add");
    expect(unwrapped((await call("mcp_legacy_add", { a: 2, b: 40 })).content)).toBe("42");
  });

  it("a hanging tool times out and the next call works", async () => {
    const { call } = await setup({ remote: httpServer(server.url, { callTimeoutMs: 300 }) }, { allowedHosts: ["127.0.0.1"] });
    expect((await call("mcp_remote_hang")).content).toContain("did not answer within 300 ms");
    expect(unwrapped((await call("mcp_remote_echo", { text: "later" })).content)).toBe("echo: later");
  });
});

describe("the address guard for HTTP MCP servers", () => {
  it("refuses a loopback address unless it is allowed, without dialling it", async () => {
    const tripwire = await startTripwire();
    closers.push(() => tripwire.close());
    const url = `http://127.0.0.1:${tripwire.port}/mcp`;
    for (const spelling of [url, `http://[::ffff:127.0.0.1]:${tripwire.port}/mcp`, `http://2130706433:${tripwire.port}/mcp`, `http://localhost:${tripwire.port}/mcp`]) {
      const { mcp, registry } = await setup({ remote: httpServer(spelling) });
      const status = mcp.status()[0]!;
      expect(status.state, spelling).toBe("refused");
      expect(status.error).toMatch(/loopback|local host name/);
      expect(status.error).toContain("tools.mcpAllowedHosts");
      expect(registry.names()).toEqual([]);
    }
    expect(tripwire.connections()).toBe(0);
  });

  it("judges the addresses a host name resolves to where the socket is made", async () => {
    const tripwire = await startTripwire();
    closers.push(() => tripwire.close());
    const resolve = vi.fn(async () => [{ address: "127.0.0.1", family: 4 }]);
    const { mcp } = await setup({ remote: httpServer(`http://mcp.example.test:${tripwire.port}/mcp`) }, { resolve });
    const status = mcp.status()[0]!;
    expect(status.state).toBe("refused");
    expect(status.error).toContain('"mcp.example.test" resolves to 127.0.0.1, a loopback address');
    expect(resolve).toHaveBeenCalledWith("mcp.example.test");
    expect(tripwire.connections()).toBe(0);
  });

  it("lets an allowed host name through to where it resolves", async () => {
    const server = await startMcpHttpServer();
    closers.push(() => server.close());
    const resolve = async () => [{ address: "127.0.0.1", family: 4 }];
    const { call } = await setup({ remote: httpServer(`http://mcp.example.test:${server.port}/mcp`) }, { resolve, allowedHosts: ["MCP.example.test"] });
    expect(unwrapped((await call("mcp_remote_echo", { text: "by name" })).content)).toBe("echo: by name");
  });
});
