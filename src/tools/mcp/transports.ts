/**
 * The SDK transport for one configured server: a child process on stdio, or an HTTP endpoint
 * through the guarded fetch.
 *
 * A stdio server gets a minimal environment: PATH and the variables its config names (checked by
 * the config schema: nothing that injects code). The SDK adds what sudo keeps (HOME, LOGNAME,
 * SHELL, TERM, USER); nothing else of this process's environment, so its API keys and tokens stay
 * out. Its stderr is read line by line for the log, never passed to the terminal.
 */
import path from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FetchLike, Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { McpServerConfig } from "../../config/mcp.js";

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export interface TransportOptions {
  /** Relative `cwd`s resolve against it; the default working directory. */
  workspace: string;
  /** The guarded fetch for HTTP servers. */
  fetch: FetchLike;
  /** One line the server wrote on stderr. */
  onStderr: (line: string) => void;
}

export type TransportKind = "stdio" | "streamable-http" | "sse";

export function transportKind(config: McpServerConfig): TransportKind {
  return config.command !== undefined ? "stdio" : config.transport;
}

/** The command line or the URL (without query or credentials), for status output. */
export function describeTarget(config: McpServerConfig): string {
  if (config.command !== undefined) return [config.command, ...config.args].map((part) => (/^[\w@%+=:,./-]+$/.test(part) ? part : JSON.stringify(part))).join(" ");
  const url = new URL(config.url!);
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/** The environment a stdio server starts with (before the SDK's sudo-like base). */
export function stdioEnvironment(config: Pick<McpServerConfig, "env">, environment: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return { PATH: environment.PATH || DEFAULT_PATH, ...config.env };
}

export function createTransport(config: McpServerConfig, options: TransportOptions): Transport {
  if (config.command !== undefined) {
    const transport = new StdioClientTransport({
      command: config.command,
      args: config.args,
      env: stdioEnvironment(config),
      cwd: path.resolve(options.workspace, config.cwd ?? "."),
      stderr: "pipe",
    });
    const stderr = transport.stderr;
    if (stderr) createInterface({ input: stderr as unknown as Readable, crlfDelay: Infinity }).on("line", options.onStderr);
    return transport;
  }
  const url = new URL(config.url!);
  const requestInit: RequestInit = { headers: config.headers };
  if (config.transport === "sse") return new SSEClientTransport(url, { requestInit, fetch: options.fetch });
  return new StreamableHTTPClientTransport(url, { requestInit, fetch: options.fetch });
}
