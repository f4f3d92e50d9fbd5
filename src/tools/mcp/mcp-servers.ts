/**
 * The MCP servers of one process (worker, `countbot agent`, the CLI's `mcp` commands): one
 * connection per configured server, shared by every turn and by subagents and team agents where
 * the config offers a server to them, and the tools of all of them under their model names
 * (`mcp_<server>_<tool>`, see ./tool-names.ts).
 *
 * Nothing connects until the first turn asks for tools. That turn waits for every server that was
 * never tried (at most its `connectTimeoutMs`); a server that does not come up is logged once and
 * offers nothing. Later turns never wait: a server still down is tried again in the background
 * when its backoff is over, and its tools join the turn after it is up. A server that came up once
 * keeps its tools on offer while it is down, so the model's next call restarts it.
 */
import type { Logger } from "pino";
import type { McpServerConfig } from "../../config/mcp.js";
import { errorMessage } from "../../errors.js";
import { JsonSchemaCompiler } from "../json-schema-parameters.js";
import type { JsonSchemaParameters, Tool, ToolSource } from "../tool.js";
import type { Resolver } from "../web-fetch.js";
import { type GuardedFetch, createGuardedFetch } from "./guarded-fetch.js";
import { type BackoffOptions, McpServerConnection, type McpServerStatus, type McpToolInfo } from "./server-connection.js";
import { formatToolResult } from "./tool-result.js";
import { assignToolNames, toolKey } from "./tool-names.js";

/** Who a tool set is for: the main agent gets every server, subagents and team agents those the config offers them. */
export type McpAudience = "agent" | "subagents" | "teams";

export interface McpServersOptions {
  servers: Record<string, McpServerConfig>;
  /** `tools.mcpAllowedHosts`. */
  allowedHosts: readonly string[];
  /** Stdio servers run here unless their config says otherwise. */
  workspace: string;
  logger: Logger;
  /** How this client introduces itself to servers. */
  clientInfo?: { name: string; version: string };
  /** Injectable for tests: DNS for HTTP servers' host names. */
  resolve?: Resolver;
  backoff?: BackoffOptions;
  now?: () => number;
  /** The longest one tool's argument check may run (default 500 ms). */
  argumentCheckDeadlineMs?: number;
}

/** A listed tool with the name the model calls it by. */
export interface McpNamedTool extends McpToolInfo {
  /** `mcp_<server>_<tool>`, as the model sees it. */
  modelName: string;
}

const MAX_DESCRIPTION = 2_000;

/** What a reload changed: servers by name. */
export interface McpReconfigured {
  added: string[];
  removed: string[];
  /** Replaced: their config changed (or, for HTTP servers, `tools.mcpAllowedHosts`). */
  replaced: string[];
}

export class McpServers {
  private connections: McpServerConnection[];
  private guardedFetch: GuardedFetch;
  private allowedHosts: string;
  private readonly compiler: JsonSchemaCompiler;
  private readonly log: Logger;
  /** Built tools by server, rebuilt when a server's tool list or the naming changes. */
  private built: Map<string, Tool[]> | undefined;
  private readonly reported = new Set<string>();

  constructor(private readonly options: McpServersOptions) {
    this.log = options.logger;
    this.compiler = new JsonSchemaCompiler({ deadlineMs: options.argumentCheckDeadlineMs });
    this.guardedFetch = createGuardedFetch({ allowedHosts: options.allowedHosts, resolve: options.resolve });
    this.allowedHosts = JSON.stringify(options.allowedHosts);
    this.connections = Object.entries(options.servers).map(([name, config]) => this.connection(name, config));
  }

  /**
   * Applies a reloaded config (SIGHUP): a server added is connected when a turn next needs it, a
   * removed one is closed (a stdio server exits), a changed one is replaced, and so is every HTTP
   * server when `mcpAllowedHosts` changed; the others keep their connection. A call in flight on a
   * server that goes away fails, and the model reads that.
   */
  async reconfigure(servers: Record<string, McpServerConfig>, allowedHosts: readonly string[]): Promise<McpReconfigured> {
    const hostsChanged = JSON.stringify(allowedHosts) !== this.allowedHosts;
    const oldFetch = hostsChanged ? this.guardedFetch : undefined;
    if (hostsChanged) {
      this.guardedFetch = createGuardedFetch({ allowedHosts, resolve: this.options.resolve });
      this.allowedHosts = JSON.stringify(allowedHosts);
    }
    const current = new Map(this.connections.map((connection) => [connection.name, connection]));
    const outcome: McpReconfigured = { added: [], removed: [], replaced: [] };
    const closing: McpServerConnection[] = [];
    const next = Object.entries(servers).map(([name, config]) => {
      const existing = current.get(name);
      current.delete(name);
      const same = existing && JSON.stringify(existing.config) === JSON.stringify(config) && !(hostsChanged && config.url !== undefined);
      if (existing && same) return existing;
      if (existing) closing.push(existing);
      (existing ? outcome.replaced : outcome.added).push(name);
      return this.connection(name, config);
    });
    outcome.removed = [...current.keys()];
    closing.push(...current.values());
    this.connections = next;
    this.built = undefined;
    await Promise.all(closing.map((connection) => connection.close()));
    await oldFetch?.close();
    return outcome;
  }

  private connection(name: string, config: McpServerConfig): McpServerConnection {
    return new McpServerConnection({
      name,
      config,
      workspace: this.options.workspace,
      fetch: this.guardedFetch.fetch,
      logger: this.options.logger,
      clientInfo: this.options.clientInfo ?? { name: "countbot", version: "0.1.0" },
      backoff: this.options.backoff,
      now: this.options.now,
      onToolsChanged: () => (this.built = undefined),
    });
  }

  /** Whether any server is configured. */
  get configured(): boolean {
    return this.connections.length > 0;
  }

  /** The servers' tools for a tool registry (see {@link McpAudience}), as they are at each load: a reload reaches it. */
  toolSource(audience: McpAudience): ToolSource {
    return { load: (signal) => this.load(this.connections.filter((connection) => audience === "agent" || connection.config[audience]), signal) };
  }

  /** Connects every server that is due (the CLI's view; turns use {@link toolSource}). */
  async connectAll(names?: readonly string[]): Promise<void> {
    await Promise.all(this.connections.filter((connection) => !names || names.includes(connection.name)).map((connection) => connection.ensure()));
  }

  status(): Array<McpServerStatus & { tools: McpNamedTool[] }> {
    const names = this.modelNames();
    return this.connections.map((connection) => {
      const status = connection.status();
      return { ...status, tools: status.tools.map((tool) => ({ ...tool, modelName: names.get(toolKey(connection.name, tool.name)) ?? "" })) };
    });
  }

  /** Closes every connection: stdio servers exit, HTTP sessions end. */
  async close(): Promise<void> {
    await Promise.all(this.connections.map((connection) => connection.close()));
    await this.guardedFetch.close();
    await this.compiler.close();
  }

  private async load(offered: McpServerConnection[], signal?: AbortSignal): Promise<Tool[]> {
    const firstTries = offered.filter((connection) => connection.untried);
    if (firstTries.length > 0) await untilAborted(Promise.all(firstTries.map((connection) => connection.ensure())), signal);
    // Servers that never came up are tried again in the background; turns do not wait for them.
    for (const connection of offered) if (!connection.hasBeenUp && connection.attemptDue) void connection.ensure();
    const built = this.tools();
    return offered.flatMap((connection) => built.get(connection.name) ?? []);
  }

  private modelNames(): Map<string, string> {
    return assignToolNames(this.connections.flatMap((connection) => connection.tools.map((tool) => ({ server: connection.name, tool: tool.name }))));
  }

  private tools(): Map<string, Tool[]> {
    if (this.built) return this.built;
    const names = this.modelNames();
    const built = new Map<string, Tool[]>();
    for (const connection of this.connections) {
      const tools: Tool[] = [];
      for (const info of connection.tools) {
        const tool = this.buildTool(connection, info, names.get(toolKey(connection.name, info.name))!);
        if (tool) tools.push(tool);
      }
      built.set(connection.name, tools);
      this.reportUnknownEnabledTools(connection);
    }
    this.built = built;
    return built;
  }

  private buildTool(connection: McpServerConnection, info: McpToolInfo, name: string): Tool | undefined {
    let parameters: JsonSchemaParameters;
    try {
      parameters = this.compiler.compile(info.inputSchema as Record<string, unknown>);
    } catch (error) {
      // The reason names the limit or the pattern: the operator can tell the server's author.
      this.reportOnce(`schema:${connection.name}:${info.name}`, () =>
        this.log.warn({ mcpServer: connection.name, tool: info.name, reason: errorMessage(error) }, `the MCP tool's input schema is refused (${errorMessage(error)}); the tool is left out`),
      );
      return undefined;
    }
    const description = `${info.description?.trim() || `The ${info.name} tool`} (from the MCP server "${connection.name}")`;
    return {
      name,
      description: description.length > MAX_DESCRIPTION ? `${description.slice(0, MAX_DESCRIPTION - 1)}…` : description,
      parameters,
      execute: async (args, context) => formatToolResult(connection.name, info.name, await connection.call(info.name, args as Record<string, unknown>, context.signal)),
    };
  }

  private reportUnknownEnabledTools(connection: McpServerConnection): void {
    const enabled = connection.config.enabledTools;
    if (!enabled || !connection.hasBeenUp) return;
    const listed = new Set(connection.tools.map((tool) => tool.name));
    const unknown = enabled.filter((name) => !listed.has(name));
    if (unknown.length === 0) return;
    this.reportOnce(`enabled:${connection.name}:${unknown.join(",")}`, () =>
      this.log.warn({ mcpServer: connection.name, unknown }, `tools.mcpServers.${connection.name}.enabledTools names tools the server does not offer`),
    );
  }

  private reportOnce(key: string, report: () => void): void {
    if (this.reported.has(key)) return;
    this.reported.add(key);
    report();
  }
}

/** Waits for `promise`, or less when `signal` aborts (the work goes on in the background). */
async function untilAborted(promise: Promise<unknown>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) {
    await promise;
    return;
  }
  if (signal.aborted) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    promise.then(done, done);
  });
}
