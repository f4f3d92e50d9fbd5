/**
 * Holds the tools, describes them to the model and executes one call: argument parsing that
 * tolerates the usual model quirks, validation that names the field, errors as values the model
 * can act on, and a cap on how much of a result goes back into the context.
 */
import path from "node:path";
import { z } from "zod";
import { ToolError, errorMessage } from "../errors.js";
import type { ToolCallRequest, ToolDefinition } from "../providers/chat-model.js";
import { type ArgumentCheck, type ArgumentIssue, type JsonSchemaParameters, type Tool, type ToolContext, type ToolSource, isJsonSchemaParameters } from "./tool.js";
import { writeWorkspaceFile } from "./workspace-files.js";

export interface ToolOutcome {
  /** What goes back to the model. */
  content: string;
  success: boolean;
  /** Parsed arguments, or the raw text when they did not parse. */
  arguments: unknown;
  /** Whether trying again might help (an unexpected exception, not a ToolError or bad arguments). */
  retryable: boolean;
}

export interface ToolRegistryOptions {
  /** Results longer than this are saved to a file and the model gets the head. */
  maxResultChars?: number;
  /** Sees every call's outcome (metrics). */
  onOutcome?: (tool: string, outcome: ToolOutcome) => void;
  /**
   * The tool names offered (an agent profile's `tools`): exact names, or prefixes ending in `*`.
   * A tool registered or loaded under any other name is left out. Default: every tool.
   */
  allow?: readonly string[];
}

/** Whether `name` is among `allowed` (exact, or a `prefix*`); no list allows all. */
export function toolAllowed(allowed: readonly string[] | undefined, name: string): boolean {
  return allowed === undefined || allowed.some((entry) => (entry.endsWith("*") ? name.startsWith(entry.slice(0, -1)) : entry === name));
}

export class ToolRegistry {
  private readonly tools = new Map<string, Tool>();
  private readonly sources: ToolSource[] = [];
  /** What the sources offered at the last {@link load}, by name. */
  private loaded = new Map<string, Tool>();
  private readonly maxResultChars: number;
  private readonly onOutcome: ToolRegistryOptions["onOutcome"];
  private cachedDefinitions: ToolDefinition[] | undefined;
  private readonly allow: readonly string[] | undefined;

  constructor(options: ToolRegistryOptions = {}) {
    this.maxResultChars = options.maxResultChars ?? 16_000;
    this.onOutcome = options.onOutcome;
    this.allow = options.allow;
  }

  register(tool: Tool): this {
    if (!toolAllowed(this.allow, tool.name)) return this;
    if (this.tools.has(tool.name)) throw new Error(`tool "${tool.name}" is registered twice`);
    this.tools.set(tool.name, tool);
    this.cachedDefinitions = undefined;
    return this;
  }

  /** Adds tools known only at run time (an MCP server's); {@link load} asks for them. */
  addSource(source: ToolSource): this {
    this.sources.push(source);
    return this;
  }

  /**
   * Asks the sources for their tools, before a turn. The first time this may wait for a source
   * to connect; a source that cannot answer offers nothing, and a name a registered tool has
   * already is left out.
   */
  async load(signal?: AbortSignal): Promise<void> {
    if (this.sources.length === 0) return;
    const offered = await Promise.all(this.sources.map((source) => source.load(signal)));
    const next = new Map<string, Tool>();
    for (const tool of offered.flat()) {
      if (!this.tools.has(tool.name) && !next.has(tool.name) && toolAllowed(this.allow, tool.name)) next.set(tool.name, tool);
    }
    const unchanged = next.size === this.loaded.size && [...next].every(([name, tool]) => this.loaded.get(name) === tool);
    if (unchanged) return;
    this.loaded = next;
    this.cachedDefinitions = undefined;
  }

  get(name: string): Tool | undefined {
    return this.tools.get(name) ?? this.loaded.get(name);
  }

  names(): string[] {
    return [...this.tools.keys(), ...this.loaded.keys()];
  }

  /** A registry with only the named tools (a subagent's subset, say), as loaded now. */
  subset(names: string[]): ToolRegistry {
    const registry = new ToolRegistry({ maxResultChars: this.maxResultChars, onOutcome: this.onOutcome });
    for (const name of names) {
      const tool = this.get(name);
      if (tool) registry.register(tool);
    }
    return registry;
  }

  /** OpenAI function definitions (JSON Schema of each tool's parameters), built once per tool set. */
  definitions(): ToolDefinition[] {
    this.cachedDefinitions ??= [...this.tools.values(), ...this.loaded.values()].map((tool) => {
      const { $schema: _ignored, ...parameters } = isJsonSchemaParameters(tool.parameters)
        ? tool.parameters.jsonSchema
        : (z.toJSONSchema(tool.parameters, { io: "input" }) as Record<string, unknown>);
      return { name: tool.name, description: tool.description, parameters };
    });
    return this.cachedDefinitions;
  }

  /** Runs one call once. Never throws for the tool's own failures: they become error values. */
  async execute(call: ToolCallRequest, context: ToolContext): Promise<ToolOutcome> {
    const outcome = await this.run(call, context);
    this.onOutcome?.(this.get(call.name) ? call.name : "unknown", outcome);
    return outcome;
  }

  private async run(call: ToolCallRequest, context: ToolContext): Promise<ToolOutcome> {
    const tool = this.get(call.name);
    if (!tool) {
      return failure(
        call.arguments,
        `unknown tool "${call.name}"`,
        `Use one of: ${this.names().join(", ") || "(no tools available)"}.`,
      );
    }
    const parsed = parseArguments(call.arguments);
    if (!parsed.ok) {
      return failure(call.arguments, `the arguments of ${call.name} are not valid JSON (${parsed.error})`, "Send the arguments again as one JSON object.");
    }
    const validated = await validate(tool.parameters, parsed.value);
    if (!validated.ok) {
      return failure(parsed.value, `invalid arguments for ${call.name}: ${validated.error}`, `Call ${call.name} again with the arguments fixed.`);
    }
    try {
      const result = await tool.execute(validated.value, context);
      return { content: await this.cap(result, call, context), success: !result.startsWith("Error:"), arguments: parsed.value, retryable: false };
    } catch (error) {
      if (error instanceof ToolError) return failure(parsed.value, error.message, error.hint);
      if (context.signal.aborted) return { ...failure(parsed.value, "the call was cancelled"), retryable: false };
      return { ...failure(parsed.value, `${call.name} failed: ${errorMessage(error)}`, "Try again differently, or tell the user what failed."), retryable: true };
    }
  }

  private async cap(result: string, call: ToolCallRequest, context: ToolContext): Promise<string> {
    if (result.length <= this.maxResultChars) return result;
    const relative = path.join(".countbot", "tool-results", `${safeName(call.id)}.txt`);
    // Through the workspace guard: the model could have made `.countbot` a symlink out of it.
    await writeWorkspaceFile(relative, result, context);
    const notice = `\n\n[result truncated: ${result.length} characters in all; the whole text is in ${relative} — read it with read_file using offset/limit]`;
    return result.slice(0, Math.max(0, this.maxResultChars - notice.length)) + notice;
  }
}

function failure(argumentsValue: unknown, fact: string, hint?: string): ToolOutcome {
  return {
    content: `Error: ${fact}.${hint ? ` Next: ${hint}` : ""}`,
    success: false,
    arguments: argumentsValue,
    retryable: false,
  };
}

function safeName(text: string): string {
  return text.replace(/[^\w.-]/g, "_").slice(0, 80) || "result";
}

type Parsed = { ok: true; value: unknown } | { ok: false; error: string };

/** JSON text → value. Empty text means no arguments; a JSON string holding JSON is unwrapped once. */
export function parseArguments(text: string): Parsed {
  if (text.trim() === "") return { ok: true, value: {} };
  try {
    let value: unknown = JSON.parse(text);
    if (typeof value === "string" && /^\s*[{[]/.test(value)) value = JSON.parse(value);
    if (value === null) value = {};
    if (typeof value !== "object" || Array.isArray(value)) return { ok: false, error: "expected a JSON object" };
    return { ok: true, value };
  } catch (error) {
    return { ok: false, error: errorMessage(error) };
  }
}

type Validated = { ok: true; value: unknown } | { ok: false; error: string };

/**
 * Validation that forgives what models commonly do: `null` for an optional field and an object or
 * array sent as a JSON string. A zod schema never sees the nulls; JSON Schema (which may allow
 * null) sees the arguments as sent first, and the forgiving repairs only when that fails.
 */
export async function validate(parameters: z.ZodType | JsonSchemaParameters, value: unknown): Promise<Validated> {
  const check = isJsonSchemaParameters(parameters) ? (input: unknown) => parameters.checkArguments(input) : async (input: unknown) => zodCheck(parameters)(input);
  if (isJsonSchemaParameters(parameters)) {
    const asSent = await check(value);
    if (asSent.ok || asSent.final) return asSent.ok ? asSent : { ok: false, error: asSent.issues.map(describeIssue).join("; ") };
  }
  const withoutNulls = stripNulls(value);
  let result = await check(withoutNulls);
  if (!result.ok && !result.final && isRecord(withoutNulls)) {
    const repaired = { ...withoutNulls };
    let changed = false;
    for (const issue of result.issues) {
      const key = issue.path[0];
      if (issue.path.length !== 1 || typeof key !== "string") continue;
      const raw = repaired[key];
      if (typeof raw !== "string" || !/^\s*[{[]/.test(raw)) continue;
      try {
        repaired[key] = JSON.parse(raw);
        changed = true;
      } catch {
        // Not JSON after all: the original issue stands.
      }
    }
    if (changed) result = await check(repaired);
  }
  if (result.ok) return result;
  return { ok: false, error: result.issues.map(describeIssue).join("; ") };
}

function zodCheck(schema: z.ZodType): (value: unknown) => ArgumentCheck {
  return (value) => {
    const result = schema.safeParse(value);
    if (result.success) return { ok: true, value: result.data };
    return {
      ok: false,
      issues: result.error.issues.map((issue) => ({
        path: issue.path.map((key) => (typeof key === "number" ? key : String(key))),
        message:
          issue.code === "unrecognized_keys" ? `unknown field(s) ${issue.keys.map((key) => `\`${key}\``).join(", ")}` : issue.message.replace(/^Invalid input: /, ""),
      })),
    };
  };
}

function describeIssue(issue: ArgumentIssue): string {
  const where = issue.path.length > 0 ? `\`${issue.path.join(".")}\`` : "arguments";
  return `${where}: ${issue.message}`;
}

function stripNulls(value: unknown): unknown {
  if (!isRecord(value)) return value;
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== null));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
