/**
 * The error classes of CountBot. Each says where it failed; `cause` carries the original error.
 */

/** A configuration value is missing or wrong. `path` names the field (e.g. `agent.maxIterations`). */
export class ConfigError extends Error {
  override name = "ConfigError";
  constructor(
    message: string,
    readonly path?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** What went wrong talking to a model provider, normalized across SDKs. */
export type ProviderErrorKind =
  | "rate-limit" // 429 that may be retried
  | "quota" // 429 for exhausted quota or billing: retrying will not help
  | "server" // 5xx or overloaded
  | "timeout"
  | "network"
  | "auth" // 401/403
  | "bad-request" // 400/404/422: the request itself is wrong
  | "context-overflow" // 400/413: the prompt does not fit the model's context window
  | "aborted" // cancelled by us
  | "stream" // the stream broke or sent something unparseable
  | "unknown";

export class ProviderError extends Error {
  override name = "ProviderError";
  readonly kind: ProviderErrorKind;
  readonly status?: number;
  /** Milliseconds the server asked us to wait (Retry-After), when it said so. */
  readonly retryAfterMs?: number;
  /** Which provider/model failed, e.g. `openai/gpt-4o-mini`. */
  readonly model?: string;
  constructor(
    message: string,
    details: { kind: ProviderErrorKind; status?: number; retryAfterMs?: number; model?: string; cause?: unknown },
  ) {
    super(message, { cause: details.cause });
    this.kind = details.kind;
    this.status = details.status;
    this.retryAfterMs = details.retryAfterMs;
    this.model = details.model;
  }

  /** Whether trying the same request again may succeed. */
  get retryable(): boolean {
    return this.kind === "rate-limit" || this.kind === "server" || this.kind === "timeout" || this.kind === "network" || this.kind === "stream";
  }
}

/** A tool failed in a way the model should read. The message follows "Error: <fact>. Next: <hint>." */
export class ToolError extends Error {
  override name = "ToolError";
  constructor(
    message: string,
    readonly hint?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** What went wrong talking to a platform. */
export type ChannelErrorKind =
  | "rate-limit" // retry after `retryAfterMs`
  | "formatting" // the platform rejected the markup: resend as plain text
  | "too-long" // the text is over the platform's limit
  | "forbidden" // blocked by the user, kicked from the group, no rights
  | "not-found" // the chat or message is gone
  | "auth" // the platform refused the credentials (401, a bad token): trying again soon will not help
  | "network"
  | "other";

/** A channel adapter or platform API failed. */
export class ChannelError extends Error {
  override name = "ChannelError";
  readonly kind: ChannelErrorKind;
  readonly retryAfterMs?: number;
  /**
   * A rate limit: the platform budget it hit, by the scope name the platform's quotas give it
   * (`chat`, `bot`), when the platform said which (Discord's X-RateLimit-Scope, Feishu's codes).
   */
  readonly scope?: string;
  constructor(
    message: string,
    readonly channel: string,
    options?: { cause?: unknown; kind?: ChannelErrorKind; retryAfterMs?: number; scope?: string },
  ) {
    super(message, options);
    this.kind = options?.kind ?? "other";
    this.retryAfterMs = options?.retryAfterMs;
    this.scope = options?.scope;
  }
}

/** The bus refused an operation: most often a lease that was lost to another worker (fencing). */
export class BusError extends Error {
  override name = "BusError";
  constructor(
    message: string,
    readonly code: "lease-lost" | "closed" | "invalid" | "unavailable",
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A turn was cancelled (`/stop`, Ctrl-C, API, shutdown). */
export class CancelledError extends Error {
  override name = "CancelledError";
  constructor(message = "cancelled") {
    super(message);
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A model call was refused because a budget it counts against is spent (src/budget). The
 * message starts "budget exhausted"; `reply` is the plain text the person reads.
 */
export class BudgetExhaustedError extends Error {
  override name = "BudgetExhaustedError";
  constructor(
    message: string,
    readonly reply: string,
    readonly budget: { kind: string; subject: string; unit: string; used: number; limit: number; resetsAt?: number },
  ) {
    super(message);
  }
}
