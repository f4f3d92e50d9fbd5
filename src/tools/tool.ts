/**
 * The Tool contract. A tool declares its parameters as a zod schema (turned into JSON Schema for
 * the model), or, when they come from elsewhere (an MCP server), as JSON Schema with a validator
 * compiled from it; it returns text. Failures are values the model can act on: throw ToolError
 * with a hint, or return a string that starts with "Error:".
 */
import type { z } from "zod";
import type { Media } from "../bus/message.js";

/** What a tool knows about the turn that called it. */
export interface ToolContext {
  sessionKey: string;
  channel: string;
  chatId: string;
  /** Absolute, realpath'd workspace root. */
  workspace: string;
  restrictToWorkspace: boolean;
  signal: AbortSignal;
  /** Sends a message into the current chat mid-turn (the `message` tool). */
  send?: (content: string, media?: Media[]) => Promise<void>;
  /**
   * The people speaking in this turn (`channel:senderId`), for tools that keep something per
   * person (the memory tool's person scope). Empty for background events and jobs.
   */
  speakers?: string[];
  /** `channel:senderId` of the person whose message started the turn: work the tool starts (a subagent, a team run) counts against their budget. */
  person?: string;
}

/** One thing wrong with the arguments: where (`[]` for the whole object) and what. */
export interface ArgumentIssue {
  path: Array<string | number>;
  message: string;
}

/** `final`: the check itself failed (it ran out of time): trying repaired arguments would fail the same way. */
export type ArgumentCheck = { ok: true; value: unknown } | { ok: false; issues: ArgumentIssue[]; final?: boolean };

/** Parameters declared as JSON Schema (an MCP server's), passed to the model as they are. */
export interface JsonSchemaParameters {
  /** The schema of the arguments object, without `$schema`. */
  jsonSchema: Record<string, unknown>;
  /** Checks the arguments against the schema (off the event loop: an untrusted schema can be costly). */
  checkArguments(value: unknown): Promise<ArgumentCheck>;
}

export interface Tool<Schema extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  parameters: Schema | JsonSchemaParameters;
  execute(args: z.infer<Schema>, context: ToolContext): Promise<string>;
}

/** Whether a tool's parameters are JSON Schema rather than zod. */
export function isJsonSchemaParameters(parameters: z.ZodType | JsonSchemaParameters): parameters is JsonSchemaParameters {
  return typeof (parameters as Partial<JsonSchemaParameters>).checkArguments === "function";
}

/**
 * Tools known only at run time (an MCP server's): the registry asks for them before each turn.
 * The first call may wait for a connection; later ones answer from what is known.
 */
export interface ToolSource {
  /** The tools as of now. Never throws: a source that cannot reach its tools offers none. */
  load(signal?: AbortSignal): Promise<Tool[]>;
}

/** Helper that keeps the schema and the execute arguments in step. */
export function defineTool<Schema extends z.ZodType>(tool: Tool<Schema>): Tool<Schema> {
  return tool;
}

/** One executed tool call, as recorded for listeners, the audit log and the tool history. */
export interface ToolCallRecord {
  id: string;
  name: string;
  /** Parsed arguments, or the raw text when it did not parse. */
  arguments: unknown;
  result: string;
  success: boolean;
  durationMs: number;
  attempts: number;
  startedAt: number;
}
