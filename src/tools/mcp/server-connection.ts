/**
 * One MCP server as a worker sees it: connected on first need, shared by every turn, restarted
 * (stdio) or reconnected (HTTP) on the next call after it went away, with backoff between failed
 * attempts. Failures of the server become ToolErrors the model can act on; nothing here throws
 * into a turn otherwise.
 *
 * States: `idle` (never tried), `connecting`, `ready`, `down` (went away or failed to come up;
 * tried again when the backoff is over), `refused` (the address guard said no: only a config
 * change helps).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError, type Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "pino";
import type { McpServerConfig } from "../../config/mcp.js";
import { ToolError, errorMessage } from "../../errors.js";
import { type AddressRefusedError, addressRefusalIn } from "./guarded-fetch.js";
import type { McpCallResult } from "./tool-result.js";
import { type TransportKind, createTransport, describeTarget, transportKind } from "./transports.js";

export type McpServerState = "idle" | "connecting" | "ready" | "down" | "refused";

/** A tool as the server lists it. */
export type McpToolInfo = Pick<McpTool, "name" | "description" | "inputSchema">;

export interface McpServerStatus {
  name: string;
  transport: TransportKind;
  /** The command line, or the URL without query or credentials. */
  target: string;
  state: McpServerState;
  /** The server's own name and version, once it answered. */
  server?: { name: string; version: string };
  /** Its tools (after `enabledTools`), as last listed. */
  tools: McpToolInfo[];
  /** Why it is down or refused. */
  error?: string;
  /** When it is down: how long until it is tried again. */
  retryInMs?: number;
}

export interface BackoffOptions {
  /** Wait after the first failed attempt; doubled after each further one. */
  initialMs: number;
  maxMs: number;
}

export interface McpServerConnectionOptions {
  name: string;
  config: McpServerConfig;
  workspace: string;
  fetch: FetchLike;
  logger: Logger;
  clientInfo: { name: string; version: string };
  backoff?: BackoffOptions;
  now?: () => number;
  /** Called when the server's tool list changed (connected, or it announced a change). */
  onToolsChanged?: () => void;
}

const defaultBackoff: BackoffOptions = { initialMs: 1_000, maxMs: 60_000 };
/** Lines of the server's stderr kept to explain a failure. */
const STDERR_LINES = 10;
const MAX_STDERR_LINE = 300;

export class McpServerConnection {
  readonly name: string;
  readonly config: McpServerConfig;
  private state: McpServerState = "idle";
  private client: Client | undefined;
  private attempt: Promise<void> | undefined;
  private toolList: McpToolInfo[] = [];
  private everUp = false;
  private failures = 0;
  private retryAt = 0;
  private lastError: string | undefined;
  private closed = false;
  /** Aborts an attempt under way when the connection is closed (shutdown does not wait out a connect timeout). */
  private readonly closing = new AbortController();
  private readonly stderrTail: string[] = [];
  /** A refusal of the address guard during the current attempt (the SSE transport hides the error's cause). */
  private refusal: AddressRefusedError | undefined;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly backoff: BackoffOptions;

  constructor(private readonly options: McpServerConnectionOptions) {
    this.name = options.name;
    this.config = options.config;
    this.log = options.logger.child({ mcpServer: options.name });
    this.now = options.now ?? Date.now;
    this.backoff = options.backoff ?? defaultBackoff;
  }

  /** Whether the server has been up since this process started (its tools are known). */
  get hasBeenUp(): boolean {
    return this.everUp;
  }

  /** The server's tools as last listed; empty before it first came up and once refused. */
  get tools(): McpToolInfo[] {
    return this.state === "refused" ? [] : this.toolList;
  }

  /** Whether no attempt to connect has ended yet (never tried, or the first one is under way). */
  get untried(): boolean {
    return !this.everUp && this.failures === 0 && this.state !== "refused";
  }

  /** Whether an attempt to connect would start now (idle, or down with the backoff over). */
  get attemptDue(): boolean {
    return !this.closed && !this.attempt && (this.state === "idle" || (this.state === "down" && this.now() >= this.retryAt));
  }

  status(): McpServerStatus {
    const version = this.client?.getServerVersion();
    return {
      name: this.name,
      transport: transportKind(this.config),
      target: describeTarget(this.config),
      state: this.state,
      ...(version ? { server: { name: version.name, version: version.version } } : {}),
      tools: this.tools,
      ...(this.lastError && this.state !== "ready" ? { error: this.lastError } : {}),
      ...(this.state === "down" ? { retryInMs: Math.max(0, this.retryAt - this.now()) } : {}),
    };
  }

  /** Connects when an attempt is due; resolves when it ended, whatever the outcome (never rejects). */
  ensure(): Promise<void> {
    if (this.attempt) return this.attempt;
    if (!this.attemptDue) return Promise.resolve();
    this.attempt = this.connect().finally(() => (this.attempt = undefined));
    return this.attempt;
  }

  /** Calls one of the server's tools; throws ToolError for everything the model should hear about. */
  async call(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<McpCallResult> {
    try {
      return await this.callOnce(tool, args, signal);
    } catch (error) {
      // The request never reached a tool (an HTTP server that restarted and forgot the session,
      // or refused the connection): connect again and send it once more.
      if (!(error instanceof Undelivered)) throw error;
      return await this.callOnce(tool, args, signal, error);
    }
  }

  private async callOnce(tool: string, args: Record<string, unknown>, signal: AbortSignal, retryOf?: Undelivered): Promise<McpCallResult> {
    if (!this.client) await this.ensure();
    const client = this.client;
    if (!client) throw this.unavailable();
    const timeoutMs = this.config.callTimeoutMs;
    try {
      return (await client.callTool({ name: tool, arguments: args }, undefined, { signal, timeout: timeoutMs })) as McpCallResult;
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
        throw new ToolError(
          `${tool} on the MCP server "${this.name}" did not answer within ${timeoutMs} ms; the call was abandoned`,
          "Carry on without it, or try once more with a smaller request; tell the user if it keeps timing out.",
          { cause: error },
        );
      }
      if (error instanceof McpError && error.code !== ErrorCode.ConnectionClosed) {
        throw new ToolError(`the MCP server "${this.name}" refused the call of ${tool}: ${error.message}`, "Fix the arguments, or use another tool.", { cause: error });
      }
      // The connection broke (the process died, the HTTP server went away or forgot the session).
      this.lost(client, `the connection broke during a call (${describeError(error)})`);
      if (!retryOf && neverDelivered(error)) throw new Undelivered(error);
      throw new ToolError(
        `the MCP server "${this.name}" went away during the call of ${tool} (${describeError(error)})`,
        "It is restarted on the next call: call again if the call is safe to repeat, otherwise check first whether it took effect.",
        { cause: error },
      );
    }
  }

  /** Closes the connection (a stdio server is asked to exit, then killed); no reconnects after this. */
  async close(): Promise<void> {
    this.closed = true;
    this.closing.abort();
    await this.attempt;
    const client = this.client;
    this.client = undefined;
    if (client) await closeQuietly(client);
  }

  private async connect(): Promise<void> {
    this.state = "connecting";
    this.stderrTail.length = 0;
    this.refusal = undefined;
    const timeoutMs = this.config.connectTimeoutMs;
    const client = new Client(this.options.clientInfo, {
      capabilities: {},
      listChanged: {
        tools: {
          onChanged: (error, tools) => {
            if (error || !tools || this.client !== client) return;
            this.toolList = this.filtered(tools);
            this.options.onToolsChanged?.();
          },
        },
      },
    });
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any([deadline, this.closing.signal]);
    try {
      const transport = createTransport(this.config, { workspace: this.options.workspace, fetch: this.watchedFetch, onStderr: (line) => this.onStderr(line) });
      await client.connect(transport, { timeout: timeoutMs, signal });
      const tools: McpTool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs, signal });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      if (this.closed) {
        await closeQuietly(client);
        return;
      }
      this.client = client;
      this.toolList = this.filtered(tools);
      this.state = "ready";
      this.failures = 0;
      this.lastError = undefined;
      client.onclose = () => this.lost(client, "the connection closed");
      this.log.info({ tools: this.toolList.length, server: client.getServerVersion()?.name }, this.everUp ? "MCP server reconnected" : "MCP server connected");
      this.everUp = true;
      this.options.onToolsChanged?.();
    } catch (error) {
      await closeQuietly(client);
      if (this.closed) {
        this.state = "down";
        return;
      }
      this.failed(error, deadline.aborted ? `did not answer within ${timeoutMs} ms` : describeError(error));
    }
  }

  private readonly watchedFetch: FetchLike = async (url, init) => {
    try {
      return await this.options.fetch(url, init);
    } catch (error) {
      this.refusal = addressRefusalIn(error) ?? this.refusal;
      throw error;
    }
  };

  private failed(error: unknown, reason: string): void {
    const stderr = this.stderrTail.length > 0 ? `; its stderr ended with: ${this.stderrTail.join(" | ")}` : "";
    this.lastError = `${reason}${stderr}`;
    this.failures += 1;
    const refusal = addressRefusalIn(error) ?? this.refusal;
    if (refusal) {
      this.lastError = refusal.message;
      this.state = "refused";
      this.log.error({ reason: this.lastError }, `MCP server "${this.name}" refused by the address guard; its tools are left out`);
      return;
    }
    this.state = "down";
    this.retryAt = this.now() + Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** (this.failures - 1));
    // Logged once: a server that never comes up must not fill the log, one attempt per backoff.
    if (this.failures === 1) {
      const what = this.everUp ? "could not be restarted" : "did not come up";
      this.log.warn({ reason: this.lastError }, `MCP server "${this.name}" ${what}; ${this.everUp ? "its tools fail until it is back" : "its tools are left out"} (tried again with backoff)`);
    } else this.log.debug({ reason: this.lastError, failures: this.failures }, "MCP server still down");
  }

  /** The connection in use went away: the next call (or turn) connects again, at once. */
  private lost(client: Client, reason: string): void {
    if (this.client !== client) return;
    this.client = undefined;
    void closeQuietly(client);
    if (this.closed) return;
    this.state = "down";
    this.retryAt = this.now();
    const stderr = this.stderrTail.length > 0 ? `; its stderr ended with: ${this.stderrTail.join(" | ")}` : "";
    this.lastError = `${reason}${stderr}`;
    this.log.warn({ reason: this.lastError }, `MCP server "${this.name}" went away; it is ${this.config.command !== undefined ? "restarted" : "reconnected"} on the next call`);
  }

  private unavailable(): ToolError {
    if (this.state === "refused") return new ToolError(`the MCP server "${this.name}" may not be reached: ${this.lastError}`, "Do not retry; tell the user if the task needs it.");
    const wait = Math.ceil(Math.max(0, this.retryAt - this.now()) / 1000);
    return new ToolError(
      `the MCP server "${this.name}" is not available (${this.lastError ?? "not connected"})`,
      wait > 0 ? `It is tried again in about ${wait} s; carry on without it or try later.` : "Carry on without it, or try once more.",
    );
  }

  private filtered(tools: McpTool[]): McpToolInfo[] {
    const enabled = this.config.enabledTools;
    const kept = enabled ? tools.filter((tool) => enabled.includes(tool.name)) : tools;
    return kept.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }));
  }

  private onStderr(line: string): void {
    this.log.debug({ stderr: line.slice(0, 2_000) }, "MCP server stderr");
    this.stderrTail.push(line.length > MAX_STDERR_LINE ? `${line.slice(0, MAX_STDERR_LINE)}…` : line);
    if (this.stderrTail.length > STDERR_LINES) this.stderrTail.shift();
  }
}

/** A call that failed before it reached the server: safe to send again. */
class Undelivered extends Error {
  constructor(cause: unknown) {
    super("the request was not delivered", { cause });
  }
}

function neverDelivered(error: unknown): boolean {
  if (error instanceof StreamableHTTPError) return error.code === 404;
  const cause = error instanceof Error ? (error.cause as { code?: unknown } | undefined) : undefined;
  return cause?.code === "ECONNREFUSED";
}

function describeError(error: unknown): string {
  if (error instanceof StreamableHTTPError && error.code === 404) return "the server no longer knows the session";
  let message = errorMessage(error);
  // fetch says only "fetch failed"; the reason is in its cause.
  const cause = error instanceof Error ? error.cause : undefined;
  if (cause instanceof Error && cause.message && !message.includes(cause.message)) message = `${message}: ${cause.message}`;
  return message;
}

async function closeQuietly(client: Client): Promise<void> {
  try {
    await client.close();
  } catch {
    // Closing what is already broken: nothing more to do.
  }
}
