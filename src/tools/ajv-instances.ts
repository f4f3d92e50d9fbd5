/**
 * The Ajv instances that check MCP tool arguments, one per JSON Schema dialect: the schema's
 * `$schema` picks 2020-12 or 2019-09, anything else is draft-07 (what most servers send). Unknown
 * keywords are tolerated, since servers write schemas for models, not for validators. Patterns
 * run on the linear-time engine (./linear-regexp.ts). Used on the main thread to compile a schema
 * once when its tool is registered, and in the argument-check worker to run it.
 */
import { Ajv, type ErrorObject } from "ajv";
import { Ajv2019 } from "ajv/dist/2019.js";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { linearRegExp } from "./linear-regexp.js";
import type { ArgumentIssue } from "./tool.js";

export type AjvInstance = Ajv | Ajv2019 | Ajv2020;
type FormatsPlugin = (ajv: AjvInstance) => AjvInstance;

// ajv-formats is CommonJS with the plugin as `module.exports` and as `default`.
const addFormats = ((addFormatsModule as unknown as { default?: FormatsPlugin }).default ?? addFormatsModule) as unknown as FormatsPlugin;

/** Ajv instances by dialect, made on first use. */
export function ajvInstances(): (dialect: string) => AjvInstance {
  const instances = new Map<string, AjvInstance>();
  return (dialect) => {
    const kind = dialect.includes("2020-12") ? "2020" : dialect.includes("2019-09") ? "2019" : "07";
    let instance = instances.get(kind);
    if (!instance) {
      const options = { strict: false, allErrors: true, validateSchema: false, logger: false as const, code: { regExp: linearRegExp } };
      instance = kind === "2020" ? new Ajv2020(options) : kind === "2019" ? new Ajv2019(options) : new Ajv(options);
      addFormats(instance);
      instances.set(kind, instance);
    }
    return instance;
  };
}

/** Ajv's errors as issues on fields: a missing field is an issue on that field. */
export function describeErrors(errors: readonly ErrorObject[]): ArgumentIssue[] {
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
