/**
 * The subagent's tools, a subset of the main agent's: files, exec with a
 * 300 s time limit and the same deny rules (destructive commands stay refused), web_fetch, and
 * web_search when a Brave key is set. Not spawn (no subagents of subagents), not message (the
 * main agent relays the result), not memory (the main agent's memory is its own).
 */
import type { ResolvedConfig } from "../../config/schema.js";
import type { ToolRegistry } from "../../tools/registry.js";
import { type ToolSetOptions, createToolSet } from "../../tools/tool-set.js";

/** A subagent's shell commands may run this long (the main agent's default is 30 s). */
export const SUBAGENT_EXEC_TIMEOUT_SECONDS = 300;

/** `sources`: the MCP servers' tools, when the config offers them to subagents or team agents. */
export type SubagentToolsOverrides = Pick<ToolSetOptions, "findExecutable" | "fetch" | "metrics" | "sources">;

/** Throws ConfigError when a configured exec pattern is not a valid regular expression. */
export function createSubagentTools(config: Pick<ResolvedConfig, "tools">, overrides: SubagentToolsOverrides = {}): ToolRegistry {
  return createToolSet(config, { ...overrides, execTimeoutSeconds: SUBAGENT_EXEC_TIMEOUT_SECONDS });
}
