/**
 * MCP tool names (sanitized, cut with a hash, collisions resolved in a fixed order) and the
 * `tools.mcpServers` config: stdio or HTTP, refused environment variables named by field, and
 * secrets masked.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load.js";
import { refusedVariableReason } from "../../../src/config/mcp.js";
import { collectSecrets, maskSecrets } from "../../../src/config/mask.js";
import { ConfigError } from "../../../src/errors.js";
import { MAX_TOOL_NAME_LENGTH, assignToolNames, sanitizedName, toolKey } from "../../../src/tools/mcp/tool-names.js";

describe("MCP tool names", () => {
  const named = (entries: Array<[string, string]>) => {
    const names = assignToolNames(entries.map(([server, tool]) => ({ server, tool })));
    return entries.map(([server, tool]) => names.get(toolKey(server, tool)));
  };

  it("are mcp_<server>_<tool> with every other character made an underscore", () => {
    expect(named([["github", "create_issue"], ["fs", "read-file"], ["web", "fetch.page"], ["x", "名前 tool/2"]])).toEqual([
      "mcp_github_create_issue",
      "mcp_fs_read-file",
      "mcp_web_fetch_page",
      "mcp_x____tool_2",
    ]);
  });

  it("are cut to 64 characters with a hash of the full name, so long names that share a head differ", () => {
    const long = "a".repeat(80);
    const [first, second] = named([["server", `${long}_one`], ["server", `${long}_two`]]);
    for (const name of [first, second]) {
      expect(name!.length).toBe(MAX_TOOL_NAME_LENGTH);
      expect(name).toMatch(/^mcp_server_a+_[0-9a-f]{8}$/);
    }
    expect(first).not.toBe(second);
    expect(named([["server", `${long}_one`]])[0]).toBe(first);
    // Exactly 64 is not cut.
    const fits = "b".repeat(64 - "mcp_s_".length);
    expect(named([["s", fits]])[0]).toBe(`mcp_s_${fits}`);
  });

  it("resolve collisions by server then tool name, whatever order the tools arrived in", () => {
    const entries: Array<[string, string]> = [["web", "fetch_page"], ["web", "fetch.page"], ["web", "fetch page"]];
    const forward = named(entries);
    const backward = named([...entries].reverse()).reverse();
    expect(forward).toEqual(backward);
    expect(new Set(forward).size).toBe(3);
    // "fetch page" sorts first, so it keeps the plain name; the others get a hash suffix.
    expect(forward[2]).toBe("mcp_web_fetch_page");
    expect(forward[0]).toMatch(/^mcp_web_fetch_page_[0-9a-f]{8}$/);
    expect(forward[1]).toMatch(/^mcp_web_fetch_page_[0-9a-f]{8}$/);
    for (const name of forward) expect(name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
  });

  it("keep apart servers whose names run into each other", () => {
    const [left, right] = named([["a_b", "c"], ["a", "b_c"]]);
    expect(sanitizedName("a_b", "c")).toBe(sanitizedName("a", "b_c"));
    expect(left).not.toBe(right);
    expect([left, right]).toContain("mcp_a_b_c");
  });
});

describe("tools.mcpServers", () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), "countbot-mcp-config-"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const load = (servers: unknown, env: Record<string, string> = {}) => {
    const file = path.join(root, "countbot.json");
    writeFileSync(file, JSON.stringify({ tools: { mcpServers: servers } }));
    return loadConfig({ file, env, cwd: root });
  };
  const loadError = (servers: unknown): ConfigError => {
    try {
      load(servers);
    } catch (error) {
      if (error instanceof ConfigError) return error;
      throw error;
    }
    throw new Error("expected a ConfigError");
  };

  it("takes a stdio server and an HTTP server with their defaults", () => {
    const config = load({ fs: { command: "npx", args: ["-y", "server"] }, docs: { url: "https://mcp.example.com/mcp" } });
    expect(config.tools.mcpServers.fs).toMatchObject({ enabled: true, command: "npx", env: {}, connectTimeoutMs: 20_000, callTimeoutMs: 60_000, subagents: false, teams: false });
    expect(config.tools.mcpServers.docs).toMatchObject({ url: "https://mcp.example.com/mcp", transport: "streamable-http", headers: {} });
    expect(config.tools.mcpAllowedHosts).toEqual([]);
  });

  it("refuses variables that inject code into the server, naming the field", () => {
    for (const name of ["NODE_OPTIONS", "LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "PYTHONSTARTUP", "BASH_ENV", "node_options"]) {
      const error = loadError({ fs: { command: "npx", env: { SAFE: "1", [name]: "--require /tmp/evil.js" } } });
      expect(error.message, name).toContain(`tools.mcpServers.fs.env.${name}:`);
      expect(error.message).toContain("refused for MCP servers");
    }
    expect(refusedVariableReason("GITHUB_TOKEN")).toBeUndefined();
    expect(refusedVariableReason("BAD-NAME")).toContain("not a valid environment variable name");
  });

  it("wants exactly one of command and url, and fields only where they apply", () => {
    expect(loadError({ none: {} }).message).toContain("tools.mcpServers.none: needs `command` (a stdio server) or `url` (an HTTP server)");
    expect(loadError({ both: { command: "npx", url: "https://mcp.example.com/mcp" } }).message).toContain("tools.mcpServers.both.url: `command` and `url` exclude each other");
    expect(loadError({ web: { url: "https://mcp.example.com/mcp", env: { A: "1" } } }).message).toContain("tools.mcpServers.web.env: only for stdio servers");
    expect(loadError({ local: { command: "npx", headers: { A: "1" } } }).message).toContain("tools.mcpServers.local.headers: only for HTTP servers");
    expect(loadError({ web: { url: "ftp://mcp.example.com/" } }).message).toContain("tools.mcpServers.web.url");
    expect(loadError({ "bad name": { command: "npx" } }).message).toContain("expected a server name of letters, digits, _ and -");
  });

  it("treats credential headers and variables as secrets", () => {
    const config = load(
      { gh: { command: "npx", env: { GITHUB_TOKEN: "ghp_0123456789abcdef", LOG_LEVEL: "debug" } }, docs: { url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer ${DOCS_TOKEN}" } } },
      { DOCS_TOKEN: "docs-secret-0123456789" },
    );
    expect(collectSecrets(config)).toEqual(expect.arrayContaining(["ghp_0123456789abcdef", "Bearer docs-secret-0123456789"]));
    const masked = maskSecrets(config);
    expect(masked.tools.mcpServers.gh!.env).toEqual({ GITHUB_TOKEN: "****cdef", LOG_LEVEL: "debug" });
    expect(masked.tools.mcpServers.docs!.headers.Authorization).toBe("****6789");
  });
});
