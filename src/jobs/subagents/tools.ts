/**
 * The subagent's tools, a subset of the main agent's (the seed design's table): files, exec with a
 * 300 s time limit and the same deny rules (destructive commands stay refused), web_fetch, and
 * web_search when a Brave key is set. Not spawn (no subagents of subagents), not message (the
 * main agent relays the result), not memory (the main agent's memory is its own).
 */
import type { ResolvedConfig } from "../../config/schema.js";
import { createEditFileTool } from "../../tools/edit-file.js";
import { createExecTool } from "../../tools/exec.js";
import { createListDirTool } from "../../tools/list-dir.js";
import { createReadFileTool } from "../../tools/read-file.js";
import { ToolRegistry } from "../../tools/registry.js";
import { createWebFetchTool } from "../../tools/web-fetch.js";
import { createWebSearchTool } from "../../tools/web-search.js";
import { createWriteFileTool } from "../../tools/write-file.js";

/** A subagent's shell commands may run this long (the main agent's default is 30 s). */
export const SUBAGENT_EXEC_TIMEOUT_SECONDS = 300;

export interface SubagentToolsOverrides {
  /** Looks up `bwrap` for exec; injectable for tests. */
  findExecutable?: (name: string) => string | undefined;
  /** The fetch web_search uses; injectable for tests. */
  fetch?: typeof fetch;
}

/** Throws ConfigError when a configured exec pattern is not a valid regular expression. */
export function createSubagentTools(config: Pick<ResolvedConfig, "tools">, overrides: SubagentToolsOverrides = {}): ToolRegistry {
  const { tools } = config;
  const registry = new ToolRegistry({ maxResultChars: tools.maxResultChars })
    .register(createReadFileTool({ maxBytes: tools.maxReadBytes }))
    .register(createWriteFileTool({ maxBytes: tools.maxWriteBytes }))
    .register(createEditFileTool({ maxBytes: tools.maxWriteBytes }))
    .register(createListDirTool());
  // What the operator switched off for the main agent stays off for its subagents.
  if (tools.exec.enabled) {
    registry.register(
      createExecTool({
        timeoutSeconds: SUBAGENT_EXEC_TIMEOUT_SECONDS,
        maxOutputChars: tools.exec.maxOutputChars,
        denyPatterns: tools.exec.denyPatterns,
        allowPatterns: tools.exec.allowPatterns,
        sandbox: tools.exec.sandbox,
        findExecutable: overrides.findExecutable,
      }),
    );
  }
  if (tools.web.enabled) {
    registry.register(createWebFetchTool({ maxBytes: tools.web.fetchMaxBytes, timeoutMs: tools.web.fetchTimeoutMs, maxRedirects: tools.web.maxRedirects }));
    const search = createWebSearchTool({
      apiKey: tools.braveApiKey,
      baseURL: tools.web.searchBaseURL,
      maxResults: tools.web.searchMaxResults,
      fetch: overrides.fetch,
    });
    if (search) registry.register(search);
  }
  return registry;
}
