/**
 * Platform quotas: the send budgets a platform documents, as the platform declares them (in
 * `channels/<name>/quotas.ts`, through the kit), and the `channels.<name>.limits` section that
 * changes them per deployment.
 *
 * A platform names each budget (a scope) and says what it is per, how many calls it allows in
 * how long, and which calls count:
 *
 * ```ts
 * export const telegramQuotas = defineQuotas({
 *   scopes: {
 *     chat: { per: "chat", limit: 1, windowMs: 1_000, calls: ["send", "edit", "draft"] },
 *     group: { per: "group", limit: 20, windowMs: 60_000, calls: ["send", "edit"] },
 *     bot: { per: "account", limit: 30, windowMs: 1_000 },
 *   },
 * });
 * ```
 *
 * Each budget is a sliding window: at most `limit` calls in any `windowMs`, the strictest reading
 * of a platform's "N per T" (a platform counting fixed windows allows everything a sliding one
 * does), so a burst of `limit` goes out at once and the next waits for the oldest to age out. The
 * send governor (send-governor.ts) takes from every budget a call counts against, at once or not
 * at all; drafts and typing may use only what is left above each shared budget's reserve (half of
 * it), so finals always find room.
 */
import { z } from "zod";
import { ConfigError } from "../errors.js";

/** A platform call, as the budgets count it: a new message, an edit, a draft (Telegram sendMessageDraft), "typing…". */
export type PlatformCall = "send" | "edit" | "draft" | "typing";

export const PLATFORM_CALLS: readonly PlatformCall[] = ["send", "edit", "draft", "typing"];

/**
 * What one budget is per: each chat (the platform's chat: a Feishu topic thread counts in its
 * group), each group chat (groups and threads only), the whole bot account, or each message
 * edited (a streaming card).
 */
export type QuotaScopeKind = "chat" | "group" | "account" | "message";

export interface QuotaScope {
  per: QuotaScopeKind;
  /** Calls allowed in any `windowMs`. */
  limit: number;
  windowMs: number;
  /** The calls that take from it. Default: every call. */
  calls?: readonly PlatformCall[];
  /** Where the number comes from, for the docs and `countbot doctor`. */
  note?: string;
}

/** A platform's budgets, by name (a name is also the key under `channels.<name>.limits`). */
export interface PlatformQuotas {
  scopes: Readonly<Record<string, QuotaScope>>;
  /**
   * The platform's chat a session chat id sends to, for the `chat` and `group` budgets (Feishu:
   * `oc_x:om_root`, a topic thread, sends to `oc_x`). Default: the chat id itself.
   */
  platformChatOf?(chatId: string): string;
}

/** Budgets one call may take from at most (the Redis script's key count). */
export const MAX_QUOTA_SCOPES = 6;

const scopeName = /^[a-z][a-zA-Z0-9]{0,31}$/;

/** Declares a platform's quotas; throws when the declaration itself is wrong (a platform author's mistake). */
export function defineQuotas(quotas: PlatformQuotas): PlatformQuotas {
  const names = Object.keys(quotas.scopes);
  if (names.length > MAX_QUOTA_SCOPES) throw new Error(`a platform declares at most ${MAX_QUOTA_SCOPES} quota scopes, not ${names.length}`);
  for (const [name, scope] of Object.entries(quotas.scopes)) {
    if (!scopeName.test(name)) throw new Error(`quota scope name "${name}": a lower-case letter, then letters and digits`);
    if (!Number.isInteger(scope.limit) || scope.limit < 1) throw new Error(`quota scope ${name}: limit must be a whole number ≥ 1`);
    if (!Number.isInteger(scope.windowMs) || scope.windowMs < 1) throw new Error(`quota scope ${name}: windowMs must be a whole number ≥ 1`);
  }
  return quotas;
}

const overrideSchema = z
  .strictObject({
    limit: z.number().int().min(1).max(1_000_000).optional().describe("Calls allowed in any window."),
    windowMs: z.number().int().min(1).max(86_400_000).optional().describe("The window, in milliseconds."),
  })
  .optional();

/**
 * The `limits` field of a platform's config section: one optional override per declared scope,
 * any other name an error naming it (`channels.telegram.limits.grup`).
 */
export function limitsSchema(quotas: PlatformQuotas) {
  const shape = Object.fromEntries(
    Object.entries(quotas.scopes).map(([name, scope]) => [name, overrideSchema.describe(`${describeScope(name, scope)}.${scope.note ? ` ${scope.note}` : ""}`)]),
  );
  return z
    .strictObject(shape)
    .optional()
    .describe("Send budgets, overriding the platform's published limits (see \"Platform limits\" in the README): `{ <scope>: { limit, windowMs } }`.");
}

export type LimitOverrides = Record<string, { limit?: number; windowMs?: number } | undefined>;

/** The platform's quotas with a config section's overrides applied. `field` names the section for errors. */
export function withLimits(quotas: PlatformQuotas, overrides: LimitOverrides | undefined, field = "limits"): PlatformQuotas {
  if (!overrides) return quotas;
  const scopes: Record<string, QuotaScope> = { ...quotas.scopes };
  for (const [name, override] of Object.entries(overrides)) {
    if (!override) continue;
    const scope = scopes[name];
    if (!scope) throw new ConfigError(`${field}.${name}: no such quota scope (known: ${Object.keys(quotas.scopes).join(", ")})`, `${field}.${name}`);
    scopes[name] = { ...scope, ...(override.limit === undefined ? {} : { limit: override.limit }), ...(override.windowMs === undefined ? {} : { windowMs: override.windowMs }) };
  }
  return { ...quotas, scopes };
}

/** `group: 20 per 60 s per group chat (send, edit)`. */
export function describeScope(name: string, scope: QuotaScope): string {
  const per = { chat: "per chat", group: "per group chat", account: "per bot account", message: "per message edited" }[scope.per];
  const calls = scope.calls ? ` (${scope.calls.join(", ")})` : "";
  return `${name}: ${scope.limit} per ${formatWindow(scope.windowMs)} ${per}${calls}`;
}

/** Every scope in one line, for logs and `countbot doctor`. */
export function describeQuotas(quotas: PlatformQuotas): string {
  return Object.entries(quotas.scopes)
    .map(([name, scope]) => describeScope(name, scope))
    .join("; ");
}

function formatWindow(ms: number): string {
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms % 1_000 === 0) return `${ms / 1_000} s`;
  return `${ms} ms`;
}
