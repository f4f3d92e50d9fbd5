/**
 * Tool parameters given as JSON Schema (an MCP server's `inputSchema`), checked with Ajv before
 * the call so bad arguments go back to the model, naming the field, without reaching the server.
 *
 * A server's schema is untrusted input, so it is bounded three ways:
 * - at registration: at most {@link MAX_SCHEMA_BYTES} of JSON and {@link MAX_SCHEMA_DEPTH} levels of
 *   nesting, and it must compile with patterns on the linear-time engine; otherwise the tool is
 *   refused with the reason (McpServers logs it);
 * - patterns (`pattern`, `patternProperties`) run on RE2 (./linear-regexp.ts), linear in the
 *   subject whatever the pattern;
 * - each check runs in a worker thread with a deadline (./argument-checks.ts), so no schema, however
 *   costly for the arguments given, holds the event loop.
 *
 * The dialect follows the schema's `$schema` (./ajv-instances.ts). Validators are compiled once per
 * distinct schema and kept, so a server that reconnects does not grow the cache.
 */
import type { ValidateFunction } from "ajv";
import { ajvInstances } from "./ajv-instances.js";
import { ArgumentChecks, type ArgumentChecksOptions } from "./argument-checks.js";
import type { JsonSchemaParameters } from "./tool.js";

/** Largest tool schema taken, as JSON. */
export const MAX_SCHEMA_BYTES = 256 * 1024;
/** Deepest nesting of objects and arrays a tool schema may have. */
export const MAX_SCHEMA_DEPTH = 32;

/** A schema refused at registration; the message says why, for the log. */
export class SchemaRefusedError extends Error {
  override name = "SchemaRefusedError";
}

/** Compiles JSON Schemas into {@link JsonSchemaParameters}; one per process is enough. */
export class JsonSchemaCompiler {
  private readonly instanceFor = ajvInstances();
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly checks: ArgumentChecks;
  private readonly deadlineMs: number;

  constructor(options: ArgumentChecksOptions = {}) {
    this.checks = new ArgumentChecks(options);
    this.deadlineMs = options.deadlineMs ?? 500;
  }

  /** Throws SchemaRefusedError (too large, too deep) or Ajv's error (does not compile, a pattern RE2 cannot take). */
  compile(schema: Record<string, unknown>): JsonSchemaParameters {
    const { $schema: dialect, ...jsonSchema } = schema;
    const text = JSON.stringify(jsonSchema);
    if (text.length > MAX_SCHEMA_BYTES) throw new SchemaRefusedError(`the input schema is ${text.length} bytes of JSON (at most ${MAX_SCHEMA_BYTES})`);
    if (deeperThan(jsonSchema, MAX_SCHEMA_DEPTH)) throw new SchemaRefusedError(`the input schema nests deeper than ${MAX_SCHEMA_DEPTH} levels`);
    const dialectName = typeof dialect === "string" ? dialect : "";
    const key = `${dialectName}\n${text}`;
    if (!this.compiled.has(key)) this.compiled.set(key, this.instanceFor(dialectName).compile(structuredClone(jsonSchema)));
    this.checks.warmUp();
    return {
      jsonSchema,
      checkArguments: async (value) => {
        const outcome = await this.checks.check(key, dialectName, jsonSchema, value).catch((error: unknown) => ({ ok: false as const, failed: (error as Error).message }));
        if (outcome.ok) return { ok: true, value };
        if ("issues" in outcome) return { ok: false, issues: outcome.issues };
        const why = "timedOut" in outcome ? `took longer than ${this.deadlineMs} ms (the tool's schema is too costly for them)` : `could not be checked (${outcome.failed})`;
        return { ok: false, final: true, issues: [{ path: [], message: `${why}; send smaller, flatter arguments` }] };
      },
    };
  }

  /** Ends the argument-check worker. */
  close(): Promise<void> {
    return this.checks.close();
  }
}

/** Whether `value` nests objects and arrays more than `limit` levels deep; stops looking at the limit. */
function deeperThan(value: unknown, limit: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  if (limit === 0) return true;
  return Object.values(value).some((child) => deeperThan(child, limit - 1));
}
