/**
 * Tool parameters given as JSON Schema (an MCP server's `inputSchema`), checked with Ajv before
 * the call so bad arguments go back to the model, naming the field, without reaching the server.
 *
 * The dialect follows the schema's `$schema` (2020-12 and 2019-09, else draft-07, which is what
 * most servers send); unknown keywords are tolerated, since servers write schemas for models, not
 * for validators. Validators are compiled once per distinct schema and kept, so a server that
 * reconnects does not grow the cache.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { Ajv2019 } from "ajv/dist/2019.js";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import type { ArgumentIssue, JsonSchemaParameters } from "./tool.js";

type AjvInstance = Ajv | Ajv2019 | Ajv2020;
type FormatsPlugin = (ajv: AjvInstance) => AjvInstance;

// ajv-formats is CommonJS with the plugin as `module.exports` and as `default`.
const addFormats = ((addFormatsModule as unknown as { default?: FormatsPlugin }).default ?? addFormatsModule) as unknown as FormatsPlugin;

/** Compiles JSON Schemas into {@link JsonSchemaParameters}; one per process is enough. */
export class JsonSchemaCompiler {
  private readonly instances = new Map<string, AjvInstance>();
  private readonly compiled = new Map<string, ValidateFunction>();

  /** Throws when the schema cannot be compiled (a broken `$ref`, a malformed keyword). */
  compile(schema: Record<string, unknown>): JsonSchemaParameters {
    const { $schema: dialect, ...jsonSchema } = schema;
    const key = `${String(dialect ?? "")}\n${JSON.stringify(jsonSchema)}`;
    let validate = this.compiled.get(key);
    if (!validate) {
      validate = this.instance(typeof dialect === "string" ? dialect : "").compile(structuredClone(jsonSchema));
      this.compiled.set(key, validate);
    }
    const check = validate;
    return {
      jsonSchema,
      checkArguments: (value) => (check(value) ? { ok: true, value } : { ok: false, issues: describeErrors(check.errors ?? []) }),
    };
  }

  private instance(dialect: string): AjvInstance {
    const kind = dialect.includes("2020-12") ? "2020" : dialect.includes("2019-09") ? "2019" : "07";
    let instance = this.instances.get(kind);
    if (!instance) {
      const options = { strict: false, allErrors: true, validateSchema: false, logger: false as const };
      instance = kind === "2020" ? new Ajv2020(options) : kind === "2019" ? new Ajv2019(options) : new Ajv(options);
      addFormats(instance);
      this.instances.set(kind, instance);
    }
    return instance;
  }
}

/** Ajv's errors as issues on fields: a missing field is an issue on that field. */
function describeErrors(errors: readonly ErrorObject[]): ArgumentIssue[] {
  const issues = new Map<string, ArgumentIssue>();
  for (const error of errors) {
    const path = pointerPath(error.instancePath);
    let issue: ArgumentIssue;
    if (error.keyword === "required") {
      issue = { path: [...path, String((error.params as { missingProperty: string }).missingProperty)], message: "is required but missing" };
    } else if (error.keyword === "additionalProperties") {
      issue = { path, message: `unknown field \`${String((error.params as { additionalProperty: string }).additionalProperty)}\`` };
    } else if (error.keyword === "enum") {
      const allowed = (error.params as { allowedValues: unknown[] }).allowedValues.map((value) => JSON.stringify(value)).join(", ");
      issue = { path, message: `must be one of ${allowed}` };
    } else {
      issue = { path, message: error.message ?? `fails \`${error.keyword}\`` };
    }
    issues.set(`${issue.path.join("\u0000")}\u0001${issue.message}`, issue);
  }
  return [...issues.values()];
}

/** `/items/0/name` → `["items", 0, "name"]`. */
function pointerPath(pointer: string): Array<string | number> {
  if (pointer === "") return [];
  return pointer
    .slice(1)
    .split("/")
    .map((part) => part.replaceAll("~1", "/").replaceAll("~0", "~"))
    .map((part) => (/^(?:0|[1-9]\d*)$/.test(part) ? Number(part) : part));
}
