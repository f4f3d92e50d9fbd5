/**
 * `countbot mcp`: the operator's view of the configured MCP servers, from this machine.
 *
 *   countbot mcp list         every server: transport, where it is, whether it comes up, its tools
 *   countbot mcp probe NAME   one server in detail: its name and version, each tool with its
 *                             parameters; exit 1 when it does not come up (the reason on stderr)
 *
 * Both connect the way a worker does (same minimal environment, same address guard), wait at most
 * each server's `connectTimeoutMs`, and close every connection before they exit. What they print
 * has the config's secrets masked (a token may sit in a command line or come back in an error).
 */
import { mkdir, realpath } from "node:fs/promises";
import { createMcpServers } from "../app/agent.js";
import { collectSecrets, redactText } from "../config/mask.js";
import type { ResolvedConfig } from "../config/schema.js";
import { ConfigError } from "../errors.js";
import type { McpServers } from "../tools/mcp/mcp-servers.js";
import { describeTarget, transportKind } from "../tools/mcp/transports.js";
import { type CliContext, loadCliConfig } from "./setup.js";

type Status = ReturnType<McpServers["status"]>[number];

const stateWords: Record<Status["state"], string> = { idle: "not tried", connecting: "connecting", ready: "up", down: "down", refused: "refused" };

export async function runMcpCommand(args: ["list"] | ["probe", string], context: CliContext = {}): Promise<number> {
  const { config, logger } = loadCliConfig(context);
  const secrets = collectSecrets(config);
  const print = (stream: NodeJS.WriteStream, text: string) => stream.write(redactText(text, secrets));
  const servers = config.tools.mcpServers;
  if (args[0] === "list") {
    const names = Object.keys(servers);
    if (names.length === 0) {
      process.stdout.write("No MCP servers configured (tools.mcpServers; see the README, MCP servers).\n");
      return 0;
    }
    const enabled = names.filter((name) => servers[name]!.enabled);
    const statuses = await withServers(config, enabled, logger, (mcp) => mcp.status());
    const lines: string[] = [];
    for (const name of names) {
      const server = servers[name]!;
      const status = statuses.find((candidate) => candidate.name === name);
      const head = `${name}  ${transportKind(server)}  ${describeTarget(server)}`;
      if (!status) {
        lines.push(`${head}  disabled`);
        continue;
      }
      lines.push(`${head}  ${describeState(status)}`);
      for (const tool of status.tools) lines.push(`  ${tool.modelName}${tool.modelName === `mcp_${name}_${tool.name}` ? "" : `  (${tool.name})`}`);
    }
    print(process.stdout, `${lines.join("\n")}\n`);
    return 0;
  }

  const name = args[1];
  const server = servers[name];
  if (!server) {
    const known = Object.keys(servers);
    throw new ConfigError(`no MCP server named "${name}" in tools.mcpServers (${known.length > 0 ? `configured: ${known.join(", ")}` : "none is configured"})`);
  }
  const [status] = await withServers(config, [name], logger, (mcp) => mcp.status());
  const lines = [`${name}: ${transportKind(server)} ${describeTarget(server)}${server.enabled ? "" : " (disabled in the config)"}`];
  if (!status || status.state !== "ready") {
    print(process.stdout, `${lines.join("\n")}\n`);
    print(process.stderr, `countbot: the MCP server "${name}" ${status?.state === "refused" ? "is refused" : "did not come up"}: ${status?.error ?? "unknown reason"}\n`);
    return 1;
  }
  if (status.server) lines.push(`server: ${status.server.name} ${status.server.version}`);
  lines.push(`tools (${status.tools.length}${server.enabledTools ? ", as enabledTools allows" : ""}):`);
  for (const tool of status.tools) {
    lines.push(`  ${tool.modelName}${tool.modelName === `mcp_${name}_${tool.name}` ? "" : `  (${tool.name})`}${tool.description ? `: ${firstLine(tool.description)}` : ""}`);
    const parameters = describeParameters(tool.inputSchema as Record<string, unknown>);
    if (parameters) lines.push(`    ${parameters}`);
  }
  print(process.stdout, `${lines.join("\n")}\n`);
  return 0;
}

async function withServers<T>(config: ResolvedConfig, names: string[], logger: ReturnType<typeof loadCliConfig>["logger"], read: (mcp: McpServers) => T): Promise<T> {
  await mkdir(config.workspace, { recursive: true });
  const workspace = await realpath(config.workspace);
  const chosen = Object.fromEntries(names.map((name) => [name, { ...config.tools.mcpServers[name]!, enabled: true }]));
  const mcp = createMcpServers({ ...config, tools: { ...config.tools, mcpServers: chosen } }, workspace, logger);
  try {
    await mcp.connectAll();
    return read(mcp);
  } finally {
    await mcp.close();
  }
}

function describeState(status: Status): string {
  const word = stateWords[status.state];
  if (status.state === "ready") return `${word} (${status.tools.length} tool${status.tools.length === 1 ? "" : "s"})`;
  return status.error ? `${word}: ${status.error}` : word;
}

function firstLine(text: string): string {
  const line = text.trim().split("\n")[0] ?? "";
  return line.length > 120 ? `${line.slice(0, 119)}…` : line;
}

/** `text* (string), count (integer)`: the top-level parameters, required ones starred. */
function describeParameters(schema: Record<string, unknown>): string {
  const properties = (schema.properties ?? {}) as Record<string, { type?: unknown }>;
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  const parts = Object.entries(properties).map(([key, property]) => {
    const type = Array.isArray(property.type) ? property.type.join("|") : typeof property.type === "string" ? property.type : "any";
    return `${key}${required.has(key) ? "*" : ""} (${type})`;
  });
  return parts.length > 0 ? `parameters: ${parts.join(", ")}` : "";
}
