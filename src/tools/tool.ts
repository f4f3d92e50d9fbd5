/**
 * The Tool contract. A tool declares its parameters as a zod schema (turned into JSON Schema for
 * the model) and returns text. Failures are values the model can act on: throw ToolError with a
 * hint, or return a string that starts with "Error:".
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
}

export interface Tool<Schema extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  parameters: Schema;
  execute(args: z.infer<Schema>, context: ToolContext): Promise<string>;
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
