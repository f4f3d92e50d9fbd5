/**
 * The config of MCP servers (`tools.mcpServers.<name>`): a program to start and talk to over
 * stdio, or an HTTP endpoint (streamable HTTP or the older SSE transport). The schema is the source
 * of the types; the checks beyond field types (stdio XOR HTTP, variables that must not be handed
 * to a server) name the field they are about.
 */
import { z } from "zod";

const positiveInt = z.number().int().positive();

/**
 * Variables that make a program load or run code it was not asked to: the dynamic loader's,
 * interpreters' start-up hooks and module paths, shell start-up files. A stdio server gets none of
 * them, whatever the config says, because a value there runs code inside the server process
 * (and the config's `${VAR}` references make it easy to pass one on without noticing).
 */
const refusedVariables = new Set([
  "NODE_OPTIONS",
  "NODE_PATH",
  "NODE_REPL_EXTERNAL_MODULE",
  "PYTHONSTARTUP",
  "PYTHONPATH",
  "PYTHONHOME",
  "PYTHONUSERBASE",
  "PERL5OPT",
  "PERL5LIB",
  "PERLLIB",
  "PERL5DB",
  "RUBYOPT",
  "RUBYLIB",
  "BASH_ENV",
  "ENV",
  "PROMPT_COMMAND",
  "SHELLOPTS",
  "BASHOPTS",
  "PS4",
  "IFS",
  "GCONV_PATH",
  "HOSTALIASES",
  "JAVA_TOOL_OPTIONS",
  "_JAVA_OPTIONS",
  "JDK_JAVA_OPTIONS",
  "ELECTRON_RUN_AS_NODE",
]);
const refusedPrefixes = ["LD_", "DYLD_", "BASH_FUNC_"];

/** Why a stdio server may not be given this variable, or undefined when it may. */
export function refusedVariableReason(name: string): string | undefined {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return "not a valid environment variable name (letters, digits and _, not starting with a digit)";
  const upper = name.toUpperCase();
  const prefix = refusedPrefixes.find((candidate) => upper.startsWith(candidate));
  if (refusedVariables.has(upper) || prefix) {
    return `${prefix ? `${prefix}* variables are` : `${name} is`} refused for MCP servers: it makes the program load or run other code`;
  }
  return undefined;
}

export const McpServerSchema = z
  .strictObject({
    enabled: z.boolean().default(true).describe("Connect to this server; `false` keeps its settings but offers none of its tools."),
    command: z.string().min(1).optional().describe("stdio: the program that runs the server, e.g. `npx`, `uvx` or `node` (found through PATH)."),
    args: z.array(z.string()).default([]).describe("stdio: the program's arguments."),
    env: z
      .record(z.string(), z.string())
      .default({})
      .describe(
        "stdio: the server's environment besides PATH (e.g. a token it needs). Nothing else of CountBot's environment is passed on, so its API keys stay out; NODE_OPTIONS, LD_*, DYLD_*, PYTHONPATH and other variables that inject code are refused.",
      ),
    cwd: z.string().optional().describe("stdio: the working directory; relative to the workspace, which is the default."),
    url: z.url({ protocol: /^https?$/ }).optional().describe("HTTP: the server's endpoint, e.g. https://mcp.example.com/mcp. Its address must be public unless its host is in `tools.mcpAllowedHosts`."),
    headers: z.record(z.string(), z.string()).default({}).describe("HTTP: headers sent with every request, e.g. Authorization (secret; use `${ENV_VAR}`)."),
    transport: z.enum(["streamable-http", "sse"]).default("streamable-http").describe("HTTP: `streamable-http` (current MCP servers) or `sse` (the older HTTP+SSE transport)."),
    enabledTools: z.array(z.string().min(1)).optional().describe("Only these of the server's tools (by the server's own names). Unset: all of them."),
    connectTimeoutMs: positiveInt.max(300_000).default(20_000).describe("Starting or reaching the server and listing its tools may take this long; then it counts as down."),
    callTimeoutMs: positiveInt.max(3_600_000).default(60_000).describe("One tool call may take this long; then the model gets a timeout error and the turn goes on."),
    subagents: z.boolean().default(false).describe("Offer this server's tools to subagents too (`spawn`)."),
    teams: z.boolean().default(false).describe("Offer this server's tools to team agents too."),
  })
  .superRefine((server, context) => {
    const issue = (path: PropertyKey[], message: string) => context.addIssue({ code: "custom", path, message });
    if (server.command === undefined && server.url === undefined) issue([], "needs `command` (a stdio server) or `url` (an HTTP server)");
    if (server.command !== undefined && server.url !== undefined) issue(["url"], "`command` and `url` exclude each other: a server is either started here (stdio) or reached over HTTP");
    if (server.url !== undefined) {
      if (server.args.length > 0) issue(["args"], "only for stdio servers (with `command`)");
      if (Object.keys(server.env).length > 0) issue(["env"], "only for stdio servers (with `command`)");
      if (server.cwd !== undefined) issue(["cwd"], "only for stdio servers (with `command`)");
    }
    if (server.command !== undefined && Object.keys(server.headers).length > 0) issue(["headers"], "only for HTTP servers (with `url`)");
    for (const name of Object.keys(server.env)) {
      const reason = refusedVariableReason(name);
      if (reason) issue(["env", name], reason);
    }
  });

export type McpServerConfig = z.infer<typeof McpServerSchema>;

/** Server names become part of tool names (`mcp_<server>_<tool>`), so they are kept to that alphabet. */
export const McpServersSchema = z
  .record(z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, "expected a server name of letters, digits, _ and - (at most 32)"), McpServerSchema)
  .default({});

/** Host names and IP addresses an HTTP MCP server may be reached at although the address guard would refuse them. */
export const McpAllowedHostsSchema = z
  .array(
    z
      .string()
      .min(1)
      .transform((host) => host.toLowerCase().replace(/^\[(.*)\]$/, "$1")),
  )
  .default([]);
