/**
 * The API's token. Closed by default, even on loopback (any local process, and any page the
 * operator visits through a DNS-rebinding trick, can reach loopback): with no `api.token`
 * configured, the first `start` or `gateway` creates one in `<dataDir>/api-token` (mode 0600) and
 * every later start reuses it. A generated token never allows binding beyond loopback: that takes
 * a token the operator chose (`api.token`, COUNTBOT_API_TOKEN).
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { isLoopbackHost } from "../api/server.js";
import type { ResolvedConfig } from "../config/schema.js";
import { ConfigError } from "../errors.js";

export interface ApiToken {
  token: string;
  /** Made here rather than configured. */
  generated: boolean;
  /** Where a generated token is kept. */
  file: string;
}

export function apiTokenFile(config: Pick<ResolvedConfig, "dataDir">): string {
  return path.join(config.dataDir, "api-token");
}

/** The configured token, else the generated one (created on first use). */
export function resolveApiToken(config: Pick<ResolvedConfig, "dataDir" | "api">): ApiToken {
  const file = apiTokenFile(config);
  const configured = config.api.token?.trim();
  if (configured) return { token: configured, generated: false, file };
  const existing = readApiTokenFile(config);
  if (existing) return { token: existing, generated: true, file };
  const token = randomBytes(24).toString("base64url");
  mkdirSync(config.dataDir, { recursive: true });
  // `wx`: two processes starting at once do not overwrite each other's token.
  try {
    writeFileSync(file, `${token}\n`, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return { token: readApiTokenFile(config)!, generated: true, file };
  }
  return { token, generated: true, file };
}

/** The generated token, when one exists (for commands that call the API: `tasks cancel`). */
export function readApiTokenFile(config: Pick<ResolvedConfig, "dataDir">): string | undefined {
  try {
    return readFileSync(apiTokenFile(config), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Refuses a bind beyond loopback with a token nobody chose. */
export function assertTokenFitsBinding(config: Pick<ResolvedConfig, "api">, token: ApiToken): void {
  if (!token.generated || isLoopbackHost(config.api.host)) return;
  throw new ConfigError(
    `refusing to serve the API on ${config.api.host} without a token: set api.token (or COUNTBOT_API_TOKEN), or bind api.host to 127.0.0.1`,
    "api.token",
  );
}
