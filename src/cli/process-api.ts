/**
 * How a command reaches the HTTP API of a running `countbot start` or `countbot gateway` (`tasks
 * cancel`, `runs cancel`, `status` without Redis): where it listens (`api.host`, `api.port`) and the
 * token it takes, the configured one or else the one it generated in `<dataDir>/api-token`. Every
 * command that calls the API goes through here, so none of them can forget the generated token.
 */
import { readApiTokenFile } from "../app/api-token.js";
import type { ResolvedConfig } from "../config/schema.js";
import { errorMessage } from "../errors.js";

/** Nothing answered at the API's address: the message says where it looked and what to check. */
export class ProcessApiUnreachable extends Error {
  override name = "ProcessApiUnreachable";
}

export interface ProcessApiAnswer {
  url: string;
  status: number;
  /** The JSON body, or undefined when it was not JSON. */
  body: unknown;
}

export interface ProcessApiOptions {
  /** How the API is reached. Default: the global fetch. */
  fetch?: typeof fetch;
  /** How long to wait for an answer. Default 10 s. */
  timeoutMs?: number;
}

/** Where to reach a server bound to `host`: a wildcard bind is reached on loopback. */
export function apiOrigin(host: string, port: number): string {
  const bare = host.trim().replace(/^\[(.*)\]$/, "$1");
  const reachable = bare === "0.0.0.0" || bare === "" ? "127.0.0.1" : bare === "::" ? "::1" : bare;
  return `http://${reachable.includes(":") ? `[${reachable}]` : reachable}:${port}`;
}

/** The running process's token: configured, or the one it generated in the data directory. */
export function processApiToken(config: Pick<ResolvedConfig, "api" | "dataDir">): string | undefined {
  return config.api.token?.trim() || readApiTokenFile(config);
}

/** One request to the running process's API, with its token. Throws {@link ProcessApiUnreachable} when nothing answers. */
export async function callProcessApi(
  config: Pick<ResolvedConfig, "api" | "dataDir">,
  request: { method: "GET" | "POST"; path: string },
  options: ProcessApiOptions = {},
): Promise<ProcessApiAnswer> {
  const url = `${apiOrigin(config.api.host, config.api.port)}${request.path}`;
  const token = processApiToken(config);
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  let response: Response;
  try {
    response = await (options.fetch ?? fetch)(url, { method: request.method, headers, signal: AbortSignal.timeout(options.timeoutMs ?? 10_000) });
  } catch (error) {
    throw new ProcessApiUnreachable(
      `no countbot process answers at ${url} (${networkReason(error)}): is \`countbot start\` or \`countbot gateway\` running there? api.host and api.port (COUNTBOT_API_HOST, COUNTBOT_API_PORT) say where to look`,
    );
  }
  const body: unknown = await response.json().catch(() => undefined);
  return { url, status: response.status, body };
}

/** `ECONNREFUSED`, `no answer in time`, ...: what fetch hides in `cause`. */
function networkReason(error: unknown): string {
  if (error instanceof Error && error.name === "TimeoutError") return "no answer in time";
  const cause = error instanceof Error ? error.cause : undefined;
  if (cause instanceof Error && "code" in cause && typeof cause.code === "string") return cause.code;
  return errorMessage(cause ?? error);
}
