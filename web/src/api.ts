/**
 * The console's one way to the API: JSON in and out, the token cookie sent by the browser (same
 * origin), a 401 anywhere sends the page back to the login form. Errors keep the API's one line,
 * and the field it names (`agents[0].dependsOn: dependency cycle: a → b → a`), so a form can show
 * the message at that field.
 */

export class ApiError extends Error {
  override name = "ApiError";
  constructor(
    message: string,
    readonly status: number,
    /** The field the message names, as a path (`agents.0.dependsOn`); undefined when it names none. */
    readonly field?: string,
  ) {
    super(message);
  }
}

const unauthorizedListeners = new Set<() => void>();

/** Called whenever the API answers 401: the cookie is missing, expired or wrong. */
export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

/**
 * `agents[0].dependsOn[1]: unknown agent …` → `agents.0.dependsOn.1`. The API starts every 400 with
 * the field's path and a colon; `body:`, `query:` and `params:` name the request as a whole.
 */
export function fieldOf(message: string): string | undefined {
  const match = /^([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*|\[\d+\])*): /.exec(message);
  if (!match || ["body", "query", "params"].includes(match[1]!)) return undefined;
  return match[1]!.replace(/\[(\d+)\]/g, ".$1");
}

export async function api<T>(path: string, init: { method?: string; body?: unknown; signal?: AbortSignal } = {}): Promise<T> {
  const response = await fetch(path, {
    method: init.method ?? "GET",
    credentials: "same-origin",
    headers: init.body === undefined ? { accept: "application/json" } : { accept: "application/json", "content-type": "application/json" },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: init.signal,
  });
  if (response.status === 401) for (const listener of unauthorizedListeners) listener();
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    const message = typeof (parsed as { error?: unknown })?.error === "string" ? (parsed as { error: string }).error : `${response.status} ${response.statusText}`;
    throw new ApiError(message, response.status, response.status === 400 || response.status === 409 ? fieldOf(message) : undefined);
  }
  return parsed as T;
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
