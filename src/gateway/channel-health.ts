/**
 * A channel's health as this process sees it, for `/ready`, `GET /api/operations`, `countbot
 * status`, the console's Operations view, `/metrics` and the log:
 *
 * - `starting`: connecting for the first time (or again, after this process took the lead);
 * - `up`: connected, delivering;
 * - `degraded`: connected, but the platform connection dropped and is coming back, or deliveries
 *   fail for the network; back to `up` on the next success;
 * - `down`: could not connect; retried with back-off (`retryAt`), slowly when the platform refused
 *   the credentials (`lastError.kind` `auth`);
 * - `standby`: over Redis, another gateway leads this platform account; this one takes over if it dies.
 *
 * The log gets one line per change of state (or of the reason for being down), never one per retry.
 */
import type { Logger } from "pino";
import { ChannelError, errorMessage } from "../errors.js";

export type ChannelState = "starting" | "up" | "degraded" | "down" | "standby";

export interface ChannelHealth {
  name: string;
  state: ChannelState;
  /** Since when (ms since the epoch) it is in this state. */
  since: number;
  /** The last failure: connecting, the connection, or a delivery. */
  lastError?: { message: string; kind: string; at: number };
  /** While down: when the next attempt to connect is due. */
  retryAt?: number;
  /** Platform events taken in, and chunks delivered, since this process started. */
  messagesIn: number;
  messagesOut: number;
}

/** A channel's health as `/ready`, the operations API and `countbot status` show it: times as ISO strings. */
export interface ChannelHealthJson {
  name: string;
  state: ChannelState;
  since: string;
  lastError?: { message: string; kind: string; at: string };
  retryAt?: string;
  messagesIn: number;
  messagesOut: number;
}

export class HealthTracker {
  private state: ChannelState = "starting";
  private since: number;
  private lastError: ChannelHealth["lastError"];
  private retryAt: number | undefined;
  private messagesIn = 0;
  private messagesOut = 0;
  private waiters: Array<() => void> = [];

  constructor(
    private readonly name: string,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.since = now();
  }

  get current(): ChannelState {
    return this.state;
  }

  /** Resolves at the next change of state. */
  changed(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  snapshot(): ChannelHealth {
    return {
      name: this.name,
      state: this.state,
      since: this.since,
      ...(this.lastError ? { lastError: { ...this.lastError } } : {}),
      ...(this.retryAt !== undefined && this.state === "down" ? { retryAt: this.retryAt } : {}),
      messagesIn: this.messagesIn,
      messagesOut: this.messagesOut,
    };
  }

  countIn(): void {
    this.messagesIn += 1;
  }

  /** A chunk reached the platform: a channel degraded by failing deliveries is up again. */
  countOut(): void {
    this.messagesOut += 1;
  }

  starting(): void {
    this.change("starting", undefined, "channel starting");
  }

  standby(): void {
    this.change("standby", undefined, "another gateway leads this platform account; standing by");
  }

  up(): void {
    this.change("up", undefined, this.state === "degraded" ? "channel recovered" : "channel connected");
  }

  /** Connected, but not well: the connection is coming back, or deliveries fail. */
  degraded(reason: unknown): void {
    if (this.state !== "up" && this.state !== "degraded") return;
    this.change("degraded", reason, "channel degraded");
  }

  /** Could not connect; the next attempt is at `retryAt`. Logged when the state or the kind of failure changes. */
  down(error: unknown, retryAt: number): void {
    this.retryAt = retryAt;
    this.change("down", error, "channel down; retrying with back-off");
  }

  private change(state: ChannelState, error: unknown, message: string): void {
    const previousKind = this.lastError?.kind;
    const at = this.now();
    if (error !== undefined) this.lastError = { message: errorMessage(error), kind: error instanceof ChannelError ? error.kind : "other", at };
    const sameReason = error === undefined || previousKind === this.lastError?.kind;
    if (state === this.state && sameReason) return;
    const from = this.state;
    if (state !== this.state) this.since = at;
    this.state = state;
    for (const wake of this.waiters.splice(0)) wake();
    // No `channel` here: the runtime's logger binds it (a second one made the JSON line carry it twice).
    const fields = { state, from, ...(error === undefined ? {} : { error: this.lastError?.message, kind: this.lastError?.kind }), ...(state === "down" ? { retryAt: new Date(this.retryAt ?? at).toISOString() } : {}) };
    if (state === "down") this.logger.error(fields, this.lastError?.kind === "auth" ? "channel down: the platform refused the credentials; retrying rarely" : message);
    else if (state === "degraded") this.logger.warn(fields, message);
    else this.logger.info(fields, message);
  }
}

/** A channel's health as `/ready` and the operations API show it: times as ISO strings. */
export function channelHealthJson(health: ChannelHealth): ChannelHealthJson {
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    name: health.name,
    state: health.state,
    since: iso(health.since),
    ...(health.lastError ? { lastError: { message: health.lastError.message, kind: health.lastError.kind, at: iso(health.lastError.at) } } : {}),
    ...(health.retryAt === undefined ? {} : { retryAt: iso(health.retryAt) }),
    messagesIn: health.messagesIn,
    messagesOut: health.messagesOut,
  };
}
