/**
 * What the MCP tests share: the config of the stdio test server (./mcp-stdio-server.ts, started
 * with node and tsx), a logger whose lines a test can read, and a tool context.
 */
import { createRequire } from "node:module";
import { Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import pino, { type Logger } from "pino";
import { type McpServerConfig, McpServerSchema } from "../../src/config/mcp.js";
import type { ToolContext } from "../../src/tools/tool.js";

const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
export const stdioServerScript = fileURLToPath(new URL("./mcp-stdio-server.ts", import.meta.url));

/** The raw config entry (as written in a config file) of the stdio test server. */
export function stdioServerEntry(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { command: process.execPath, args: ["--import", tsxLoader, stdioServerScript], ...extra };
}

export function stdioServer(extra: Record<string, unknown> = {}): McpServerConfig {
  return McpServerSchema.parse(stdioServerEntry(extra));
}

export function httpServer(url: string, extra: Record<string, unknown> = {}): McpServerConfig {
  return McpServerSchema.parse({ url, ...extra });
}

export interface RecordingLogger {
  logger: Logger;
  records: () => Array<Record<string, unknown>>;
}

export function recordingLogger(level = "debug"): RecordingLogger {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      callback();
    },
  });
  return { logger: pino({ level }, stream), records: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

export function toolContext(workspace: string, signal = new AbortController().signal): ToolContext {
  return { sessionKey: "test:1", channel: "test", chatId: "1", workspace, restrictToWorkspace: true, signal };
}

/** The text between the untrusted-data tags of a tool result. */
export function unwrapped(content: string): string {
  const match = /<external_content[^>]*>\n([\s\S]*)\n<\/external_content>/.exec(content);
  if (!match) throw new Error(`not a wrapped MCP result: ${content}`);
  return match[1]!;
}

/** Polls `check` every 10 ms until it holds (10 s at most). */
export async function eventually(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
