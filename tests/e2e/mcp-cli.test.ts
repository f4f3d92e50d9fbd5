/**
 * MCP servers from the command line, as child processes: `countbot mcp list` and `countbot mcp
 * probe NAME` against the stdio and streamable-HTTP test servers (and ones that are refused,
 * broken or disabled), and `countbot agent -m` where the fake OpenAI server, through the real SDK,
 * has the agent call MCP tools: the answer uses their result, the stdio server's environment holds
 * no API key, and the process exits with the server stopped.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { type McpHttpServer, startMcpHttpServer, startTripwire } from "../support/mcp-http-server.js";
import { stdioServerEntry, unwrapped } from "../support/mcp-fixtures.js";
import { runCli } from "../support/run-cli.js";

let root: string;
let configFile: string;
let http: McpHttpServer;
let tripwire: Awaited<ReturnType<typeof startTripwire>>;
let llm: FakeOpenAIServer;
const API_KEY = "sk-e2e-mcp-0123456789abcdef";
/** A secret of the broken server's config that its command line and its stderr repeat. */
const BROKEN_TOKEN = "db-secret-token-98765";

function toolResults(body: Record<string, unknown>): Map<string, string> {
  const results = new Map<string, string>();
  const messages = body.messages as Array<{ role: string; name?: string; tool_call_id?: string; content?: unknown }>;
  const calls = new Map<string, string>();
  for (const message of messages as Array<{ role: string; tool_calls?: Array<{ id: string; function: { name: string } }> }>) {
    for (const call of message.tool_calls ?? []) calls.set(call.id, call.function.name);
  }
  for (const message of messages) if (message.role === "tool") results.set(calls.get(message.tool_call_id ?? "") ?? "?", String(message.content));
  return results;
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-mcp-e2e-"));
  http = await startMcpHttpServer();
  tripwire = await startTripwire();
  llm = await startFakeOpenAI({
    script: (body) => {
      const results = toolResults(body);
      if (results.size === 0) {
        return { toolCalls: [{ name: "mcp_local_pid", arguments: "{}" }, { name: "mcp_local_environment", arguments: "{}" }] };
      }
      const environment = JSON.parse(unwrapped(results.get("mcp_local_environment") ?? "")) as Record<string, string>;
      const leaked = JSON.stringify(environment).includes(API_KEY) || "OPENAI_API_KEY" in environment;
      return { text: `${leaked ? "LEAKED" : "clean"}; token ${environment.MCP_TEST_TOKEN ?? "missing"}; pid ${unwrapped(results.get("mcp_local_pid") ?? "")}` };
    },
  });
  configFile = path.join(root, "countbot.json");
  await writeFile(
    configFile,
    JSON.stringify({
      tools: {
        exec: { enabled: false },
        mcpServers: {
          local: stdioServerEntry({ env: { MCP_TEST_TOKEN: "server-token" } }),
          remote: { url: http.url, enabledTools: ["echo", "fetch.page"] },
          blocked: { url: `http://127.0.0.1:${tripwire.port}/mcp`, transport: "sse" },
          broken: (() => {
            const entry = stdioServerEntry({ env: { MCP_TEST_EXIT_AT_START: "5", MCP_TEST_STDERR: `cannot open the database with ${BROKEN_TOKEN}`, DB_TOKEN: BROKEN_TOKEN } });
            return { ...entry, args: [...(entry.args as string[]), "--token", BROKEN_TOKEN] };
          })(),
          off: { ...stdioServerEntry(), enabled: false },
        },
        // Nothing allowed: the HTTP test server on loopback is refused like the tripwire.
        mcpAllowedHosts: [],
      },
    }),
  );
});

afterAll(async () => {
  await llm?.close();
  await http?.close();
  await tripwire?.close();
  await rm(root, { recursive: true, force: true });
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  return { HOME: root, COUNTBOT_DATA_DIR: path.join(root, "data"), COUNTBOT_CONFIG: configFile, ...extra };
}

describe("countbot mcp", () => {
  it("lists every server with its state and tools, refusing a loopback URL that is not allowed", async () => {
    const run = await runCli(["mcp", "list"], { env: env() });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    const local = lines.findIndex((line) => line.startsWith("local  stdio  "));
    expect(lines[local]).toMatch(/ up \(8 tools\)$/);
    expect(lines.slice(local + 1, local + 9)).toEqual([
      "  mcp_local_echo",
      "  mcp_local_add",
      "  mcp_local_environment",
      "  mcp_local_pid",
      "  mcp_local_crash",
      "  mcp_local_hang",
      "  mcp_local_fail",
      "  mcp_local_fetch_page  (fetch.page)",
    ]);
    // Without 127.0.0.1 in tools.mcpAllowedHosts the HTTP server on loopback is refused too.
    expect(lines.find((line) => line.startsWith("remote  streamable-http  "))).toMatch(/refused: .*127\.0\.0\.1 is a loopback address; list its host in tools\.mcpAllowedHosts/);
    expect(lines.find((line) => line.startsWith("blocked  sse  "))).toMatch(/refused: .*loopback/);
    expect(lines.find((line) => line.startsWith("broken  stdio  "))).toMatch(/ --token \*\*\*\*8765 {2}down: .*cannot open the database with \*\*\*\*8765/);
    expect(run.stdout).not.toContain(BROKEN_TOKEN);
    expect(lines.find((line) => line.startsWith("off  stdio  "))).toMatch(/ disabled$/);
    expect(tripwire.connections()).toBe(0);
    expect(http.sessionsStarted()).toBe(0);
  });

  it("reaches the HTTP server once its host is allowed", async () => {
    const allowed = path.join(root, "allowed.json");
    await writeFile(allowed, JSON.stringify({ tools: { mcpServers: { remote: { url: http.url, enabledTools: ["echo", "fetch.page"] } }, mcpAllowedHosts: ["127.0.0.1"] } }));
    const run = await runCli(["mcp", "list"], { env: env({ COUNTBOT_CONFIG: allowed }) });
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^remote {2}streamable-http {2}http:\/\/127\.0\.0\.1:\d+\/mcp {2}up \(2 tools\)\n {2}mcp_remote_echo\n {2}mcp_remote_fetch_page {2}\(fetch\.page\)\n$/);
    expect(http.sessionsStarted()).toBe(1);
  });

  it("probes one server: its name, version, tools and parameters", async () => {
    const run = await runCli(["mcp", "probe", "local"], { env: env() });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("server: countbot-test-server 1.0.0\ntools (8):\n");
    expect(run.stdout).toContain("  mcp_local_echo: Repeats the text.\n    parameters: text* (string)\n");
    expect(run.stdout).toContain("  mcp_local_add: Adds two whole numbers.\n    parameters: a* (integer), b* (integer)\n");
    expect(run.stdout).toContain("  mcp_local_fetch_page  (fetch.page): A tool whose name needs sanitizing.\n    parameters: url (string)\n");
  });

  it("says in one line why a server did not come up, and exits 1", async () => {
    const run = await runCli(["mcp", "probe", "broken"], { env: env() });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^countbot: the MCP server "broken" did not come up: .*cannot open the database with \*\*\*\*8765\n$/);
    expect(run.stdout).toMatch(/^broken: stdio .* --token \*\*\*\*8765\n$/);
  });

  it("names the configured servers when asked for one that is not", async () => {
    const run = await runCli(["mcp", "probe", "nope"], { env: env() });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('countbot: no MCP server named "nope" in tools.mcpServers (configured: local, remote, blocked, broken, off)\n');
  });
});

describe("countbot doctor with MCP servers", () => {
  it("checks every enabled server: up with its tools, or why not, masked; a disabled one is left out", async () => {
    const run = await runCli(["doctor"], { env: env({ OPENAI_API_KEY: API_KEY, OPENAI_BASE_URL: llm.url, COUNTBOT_MODEL: "openai/gpt-test" }) });
    expect(run.code).toBe(1);
    const lines = run.stdout.split("\n");
    expect(lines).toContain("✓ mcp local: up (countbot-test-server 1.0.0, 8 tools)");
    expect(lines.find((line) => line.startsWith("✗ mcp remote: "))).toMatch(/refused: .*loopback.*tools\.mcpAllowedHosts.*\(countbot mcp probe remote shows more\)$/);
    expect(lines.find((line) => line.startsWith("✗ mcp blocked: "))).toMatch(/refused: .*loopback/);
    expect(lines.find((line) => line.startsWith("✗ mcp broken: "))).toMatch(/did not come up: .*cannot open the database with \*\*\*\*8765/);
    expect(run.stdout).not.toContain(BROKEN_TOKEN);
    expect(run.stdout).not.toContain("mcp off");
    expect(run.stdout).toContain("3 checks failed");
    expect(tripwire.connections()).toBe(0);
  });
});

describe("countbot agent -m with an MCP server", () => {
  it("answers with the MCP tools' results; the server never sees the API key and is stopped at exit", async () => {
    const run = await runCli(["agent", "-m", "what does the server see?"], {
      env: env({ OPENAI_API_KEY: API_KEY, OPENAI_BASE_URL: llm.url, COUNTBOT_MODEL: "openai/gpt-test" }),
    });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const match = /^clean; token server-token; pid (\d+)\n$/.exec(run.stdout);
    expect(match, run.stdout).not.toBeNull();
    expect(() => process.kill(Number(match![1]), 0)).toThrow();
    // The agent's first call (doctor's model check, in the test before, offers no tools).
    const first = llm.requests.find((request) => Array.isArray(request.body.tools));
    const offered = (first!.body.tools as Array<{ function: { name: string } }>).map((tool) => tool.function.name);
    expect(offered).toContain("mcp_local_environment");
    expect(offered.some((name) => name.startsWith("mcp_broken_") || name.startsWith("mcp_off_") || name.startsWith("mcp_blocked_"))).toBe(false);
  });
});
