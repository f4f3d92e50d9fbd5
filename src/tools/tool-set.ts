/**
 * The built-in tools as the config allows them, assembled once for the main agent and its
 * subagents: files, exec, web_fetch, and web_search when a Brave key is set. Callers add their own
 * (memory, message, spawn, cron) with `extra`, and MCP servers' tools with `sources`.
 */
import type { ResolvedConfig } from "../config/schema.js";
import type { Metrics } from "../metrics.js";
import { createEditFileTool } from "./edit-file.js";
import { createExecTool } from "./exec.js";
import { createListDirTool } from "./list-dir.js";
import { createReadFileTool } from "./read-file.js";
import { ToolRegistry } from "./registry.js";
import type { Tool, ToolSource } from "./tool.js";
import { createWebFetchTool } from "./web-fetch.js";
import { createWebSearchTool } from "./web-search.js";
import { createWriteFileTool } from "./write-file.js";

export interface ToolSetOptions {
  /** A shell command's time limit; default the config's `tools.exec.timeoutSeconds`. */
  execTimeoutSeconds?: number;
  /** More tools, registered after the built-in ones. */
  extra?: Tool[];
  /** Tools known only at run time (MCP servers'), loaded before each turn. */
  sources?: ToolSource[];
  /** Looks up `bwrap` for exec; injectable for tests. */
  findExecutable?: (name: string) => string | undefined;
  /** The fetch web_search uses; injectable for tests. */
  fetch?: typeof fetch;
  /** Counts tool calls by tool and outcome. */
  metrics?: Pick<Metrics, "toolCall">;
  /** The tool names offered (an agent profile's `tools`, see ToolRegistryOptions.allow). Default: all. */
  allow?: readonly string[];
}

/** Throws ConfigError when a configured exec pattern is not a valid regular expression. */
export function createToolSet(config: Pick<ResolvedConfig, "tools">, options: ToolSetOptions = {}): ToolRegistry {
  const { tools } = config;
  const metrics = options.metrics;
  const onOutcome = metrics && ((tool: string, outcome: { success: boolean }) => metrics.toolCall(tool, outcome.success ? "ok" : "error"));
  const registry = new ToolRegistry({ maxResultChars: tools.maxResultChars, onOutcome, allow: options.allow })
    .register(createReadFileTool({ maxBytes: tools.maxReadBytes }))
    .register(createListDirTool())
    .register(createWriteFileTool({ maxBytes: tools.maxWriteBytes }))
    .register(createEditFileTool({ maxBytes: tools.maxWriteBytes }));
  // What the operator switched off stays off for the main agent and its subagents alike.
  if (tools.exec.enabled) {
    registry.register(
      createExecTool({
        timeoutSeconds: options.execTimeoutSeconds ?? tools.exec.timeoutSeconds,
        maxOutputChars: tools.exec.maxOutputChars,
        denyPatterns: tools.exec.denyPatterns,
        allowPatterns: tools.exec.allowPatterns,
        sandbox: tools.exec.sandbox,
        findExecutable: options.findExecutable,
      }),
    );
  }
  if (tools.web.enabled) {
    registry.register(createWebFetchTool({ maxBytes: tools.web.fetchMaxBytes, timeoutMs: tools.web.fetchTimeoutMs, maxRedirects: tools.web.maxRedirects }));
    const search = createWebSearchTool({ apiKey: tools.braveApiKey, baseURL: tools.web.searchBaseURL, maxResults: tools.web.searchMaxResults, fetch: options.fetch });
    if (search) registry.register(search);
  }
  for (const tool of options.extra ?? []) registry.register(tool);
  for (const source of options.sources ?? []) registry.addSource(source);
  return registry;
}
