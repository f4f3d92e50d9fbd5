/**
 * The worker thread that runs MCP tool argument checks (./argument-checks.ts sends them). A check
 * here can take as long as a hostile schema makes it (an `anyOf` of self-references grows as 3^depth
 * of the arguments, `uniqueItems` as the square of an array) without holding the main event loop;
 * the main thread ends this worker when a check overruns its deadline.
 *
 * Messages in: `{ id, key, dialect?, schema?, value }` (the schema only the first time this worker
 * sees the key). Out: `{ ready: true }` once loaded, then per check `{ id, ok: true } |
 * { id, ok: false, issues } | { id, error }`.
 */
import { parentPort } from "node:worker_threads";
import type { ValidateFunction } from "ajv";
import { ajvInstances, describeErrors } from "./ajv-instances.js";

interface CheckRequest {
  id: number;
  key: string;
  dialect?: string;
  schema?: Record<string, unknown>;
  value: unknown;
}

const instanceFor = ajvInstances();
const compiled = new Map<string, ValidateFunction>();

parentPort?.on("message", (request: CheckRequest) => {
  try {
    let validate = compiled.get(request.key);
    if (!validate) {
      if (!request.schema) throw new Error(`no schema for ${request.key}`);
      validate = instanceFor(request.dialect ?? "").compile(request.schema);
      compiled.set(request.key, validate);
    }
    const ok = validate(request.value);
    parentPort!.postMessage(ok ? { id: request.id, ok } : { id: request.id, ok, issues: describeErrors(validate.errors ?? []) });
  } catch (error) {
    parentPort!.postMessage({ id: request.id, error: (error as Error).message });
  }
});

// Loaded: checks may start (their deadline begins now, not while this module loaded).
parentPort?.postMessage({ ready: true });
