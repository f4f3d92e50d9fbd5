/**
 * Long polling with getUpdates, one update at a time and in order. An update is confirmed (the
 * next `offset` moves past it) only after it was handled, so a crash redelivers it and inbound
 * dedupe drops the copy. Own loop rather than telegraf's launch(): that one handles a batch in
 * parallel (no order per chat), and its retry sleep cannot be cut short, so stop() would leave a
 * timer behind. Here stop() aborts the pending request and any pause, and resolves when the loop
 * has ended: no request or timer outlives it.
 */
import type { Logger } from "pino";
import { backoffDelay, sleep } from "../../src/gateway/kit/index.js";
import { BusError, ChannelError, errorMessage } from "../../src/errors.js";

export interface GetUpdatesParams {
  offset?: number;
  /** Seconds the server may hold the request open waiting for an update. */
  timeout: number;
  limit?: number;
}

export interface PollingOptions {
  getUpdates(params: GetUpdatesParams, signal: AbortSignal): Promise<unknown[]>;
  /** Handles one update; a rejection retries it (up to `maxAttempts`) unless the signal aborted. */
  handle(update: unknown, signal: AbortSignal): Promise<void>;
  timeoutSeconds: number;
  logger: Logger;
  /**
   * Attempts at an update whose handling keeps failing before it is skipped. Default 5. A bus that
   * cannot store it now (BusError "unavailable": Redis away, the in-process bus full) is not the
   * update's failure: that is tried again for as long as it lasts (Telegram keeps updates a day).
   */
  maxAttempts?: number;
  /** First pause after a failure, doubled each time up to 30 s. Default 500 ms. */
  backoffBaseMs?: number;
  /** getUpdates started failing (false) or works again (true): once per outage each, as the log says it. */
  onConnectionChange?: (connected: boolean, reason?: string) => void;
}

export interface Polling {
  /** Aborts the pending getUpdates, confirms what was handled, resolves when the loop has ended. */
  stop(): Promise<void>;
}

const maxBackoffMs = 30_000;
const confirmTimeoutMs = 5_000;

function updateIdOf(update: unknown): number | undefined {
  const id = (update as { update_id?: unknown } | null)?.update_id;
  return typeof id === "number" && Number.isInteger(id) ? id : undefined;
}

export function startPolling(options: PollingOptions): Polling {
  const poller = new Poller(options);
  const done = poller.loop().catch((error: unknown) => options.logger.error({ channel: "telegram", error: errorMessage(error) }, "telegram polling crashed"));
  return {
    async stop() {
      poller.abort();
      await done;
    },
  };
}

/** One polling loop: the offset it has reached, the one the server last heard, and the failures so far. */
class Poller {
  private readonly logger: Logger;
  private readonly maxAttempts: number;
  private readonly backoffBaseMs: number;
  private readonly controller = new AbortController();
  private offset: number | undefined;
  /** The offset the server last heard: updates below it are confirmed. */
  private confirmed: number | undefined;
  private failures = 0;
  private readonly attempts = new Map<number, number>();
  /** Tries of the update waiting for the bus, for the pause only. */
  private busWaits = 0;

  constructor(private readonly options: PollingOptions) {
    this.logger = options.logger;
    this.maxAttempts = options.maxAttempts ?? 5;
    this.backoffBaseMs = options.backoffBaseMs ?? 500;
  }

  private get signal(): AbortSignal {
    return this.controller.signal;
  }

  abort(): void {
    this.controller.abort();
  }

  /** Polls until aborted, then confirms what was handled. */
  async loop(): Promise<void> {
    while (!this.signal.aborted) {
      const updates = await this.poll();
      if (updates) await this.handleBatch(updates);
    }
    await this.confirm();
  }

  /** One getUpdates; undefined when it failed (logged once per outage, then paused). */
  private async poll(): Promise<unknown[] | undefined> {
    const { logger, options } = this;
    try {
      const sent = this.offset;
      const updates = await options.getUpdates({ offset: this.offset, timeout: options.timeoutSeconds }, this.signal);
      this.confirmed = sent;
      if (this.failures > 0) {
        logger.info({ channel: "telegram", failures: this.failures }, "telegram getUpdates works again");
        options.onConnectionChange?.(true);
      }
      this.failures = 0;
      return updates;
    } catch (error) {
      if (this.signal.aborted) return undefined;
      const conflict = error instanceof ChannelError && /\b409\b/.test(error.message);
      const fields = { channel: "telegram", error: errorMessage(error), failures: this.failures + 1 };
      // One line when an outage starts, not one per retry. 409: a webhook is set or another
      // process polls the same bot; both need an operator.
      if (this.failures > 0) logger.debug(fields, "telegram getUpdates still failing; retrying");
      else if (conflict) logger.error(fields, "telegram getUpdates conflict: is another gateway polling this bot, or a webhook set?");
      else logger.warn(fields, "telegram getUpdates failed; retrying");
      if (this.failures === 0) options.onConnectionChange?.(false, `telegram getUpdates fails: ${errorMessage(error)}`);
      await this.pause(this.delayAfter(error, this.failures++));
      return undefined;
    }
  }

  /** Handles a batch in order; false when it stopped early (abort, or an update to try again). */
  private async handleBatch(updates: unknown[]): Promise<boolean> {
    for (const update of updates) {
      if (this.signal.aborted) return false;
      const updateId = updateIdOf(update);
      if (updateId === undefined) continue;
      try {
        await this.options.handle(update, this.signal);
      } catch (error) {
        if (this.signal.aborted || (await this.retryLater(updateId, error))) return false;
      }
      this.attempts.delete(updateId);
      this.busWaits = 0;
      this.offset = updateId + 1;
    }
    return true;
  }

  /**
   * After a failed update: true (after a pause) when it is to be tried again, false when it failed
   * too often and is skipped. A bus that cannot take it now is waited out without counting.
   */
  private async retryLater(updateId: number, error: unknown): Promise<boolean> {
    const { logger } = this;
    if (error instanceof BusError && error.code === "unavailable") {
      this.busWaits += 1;
      logger.warn({ channel: "telegram", updateId, tries: this.busWaits, error: errorMessage(error) }, "the bus cannot take the telegram update now; will retry");
      await this.pause(this.delayAfter(error, this.busWaits - 1));
      return true;
    }
    const attempt = (this.attempts.get(updateId) ?? 0) + 1;
    this.attempts.set(updateId, attempt);
    if (attempt < this.maxAttempts) {
      logger.warn({ channel: "telegram", updateId, attempt, error: errorMessage(error) }, "telegram update failed; will retry");
      await this.pause(this.delayAfter(error, attempt - 1));
      return true;
    }
    logger.error({ channel: "telegram", updateId, attempt, error: errorMessage(error) }, "telegram update failed too often; skipped");
    return false;
  }

  /** Tells the server the handled updates are done, so a restart does not get them again. */
  private async confirm(): Promise<void> {
    if (this.offset === undefined || this.offset === this.confirmed) return;
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), confirmTimeoutMs);
    try {
      await this.options.getUpdates({ offset: this.offset, timeout: 0, limit: 1 }, timeout.signal);
    } catch (error) {
      this.logger.debug({ channel: "telegram", error: errorMessage(error) }, "telegram could not confirm the last updates; they will be delivered again");
    } finally {
      clearTimeout(timer);
    }
  }

  private delayAfter(error: unknown, failures: number): number {
    if (error instanceof ChannelError && error.retryAfterMs !== undefined) return error.retryAfterMs;
    return backoffDelay(failures + 1, this.backoffBaseMs, maxBackoffMs);
  }

  private pause(milliseconds: number): Promise<void> {
    return sleep(milliseconds, this.signal).catch(() => undefined);
  }
}
