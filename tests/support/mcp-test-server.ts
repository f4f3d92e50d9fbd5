/**
 * A real MCP server, on the SDK's own server classes, for the MCP client's tests. Its tools:
 *
 * - `echo {text}`: answers `echo: <text>`.
 * - `add {a, b}` (integers, nothing else): answers the sum. Its schema is strict, so bad arguments
 *   can be shown to stop at the client.
 * - `environment`: its own process environment, as JSON.
 * - `pid`: its process id (a restarted stdio server answers with another one).
 * - `crash`: exits the process (stdio) without answering.
 * - `hang`: never answers until the client cancels.
 * - `fail`: answers with `isError` and a message.
 * - `fetch.page {url}`: a name with a character tool names may not have.
 *
 * Every call is counted in `calls` (and, on stdio, appended to the file in MCP_TEST_CALL_LOG), so a
 * test can prove a call never reached the server.
 */
import { appendFileSync } from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";

export interface TestServerOptions {
  /** Reported as the server's name. */
  name?: string;
  /** Appended one line per call: `<tool> <JSON arguments>`. */
  callLog?: string;
  /** What `crash` does; default: exit the process. */
  onCrash?: () => void;
  /** Where calls are counted; default: a new list. */
  calls?: TestMcpServer["calls"];
  /** More tools, each answering `ok <JSON arguments>`: schemas a test wants a server to declare. */
  extraTools?: Array<{ name: string; description: string; inputSchema: Record<string, unknown> }>;
}

export interface TestMcpServer {
  server: Server;
  calls: Array<{ tool: string; arguments: unknown }>;
}

const noArguments = { type: "object", properties: {} };

export const testTools = [
  { name: "echo", description: "Repeats the text.", inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } },
  {
    name: "add",
    description: "Adds two whole numbers.",
    inputSchema: { $schema: "http://json-schema.org/draft-07/schema#", type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } }, required: ["a", "b"], additionalProperties: false },
  },
  { name: "environment", description: "The server's environment variables, as JSON.", inputSchema: noArguments },
  { name: "pid", description: "The server's process id.", inputSchema: noArguments },
  { name: "crash", description: "Exits without answering.", inputSchema: noArguments },
  { name: "hang", description: "Never answers.", inputSchema: noArguments },
  { name: "fail", description: "Reports a failure.", inputSchema: noArguments },
  { name: "fetch.page", description: "A tool whose name needs sanitizing.", inputSchema: { type: "object", properties: { url: { type: "string" } } } },
];

export function createTestMcpServer(options: TestServerOptions = {}): TestMcpServer {
  const calls: TestMcpServer["calls"] = options.calls ?? [];
  const server = new Server({ name: options.name ?? "countbot-test-server", version: "1.0.0" }, { capabilities: { tools: {} } });
  const extraTools = options.extraTools ?? [];
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...testTools, ...extraTools] }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name } = request.params;
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    calls.push({ tool: name, arguments: args });
    if (options.callLog) appendFileSync(options.callLog, `${name} ${JSON.stringify(args)}\n`);
    const text = (value: string): CallToolResult => ({ content: [{ type: "text", text: value }] });
    if (extraTools.some((tool) => tool.name === name)) return text(`ok ${JSON.stringify(args)}`);
    switch (name) {
      case "echo":
        return text(`echo: ${String(args.text)}`);
      case "add":
        return text(String(Number(args.a) + Number(args.b)));
      case "environment":
        return text(JSON.stringify(process.env));
      case "pid":
        return text(String(process.pid));
      case "crash":
        (options.onCrash ?? (() => process.exit(3)))();
        return new Promise<never>(() => undefined);
      case "hang":
        return new Promise<never>((_, reject) => extra.signal.addEventListener("abort", () => reject(new Error("cancelled")), { once: true }));
      case "fail":
        return { isError: true, content: [{ type: "text", text: "the disk is full" }] };
      case "fetch.page":
        return text(`page at ${String(args.url)}`);
      default:
        throw new Error(`no tool ${name}`);
    }
  });
  return { server, calls };
}
