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
  const { logger, maxAttempts = 5, backoffBaseMs = 500 } = options;
  const delayAfter = (error: unknown, failures: number): number => {
    if (error instanceof ChannelError && error.retryAfterMs !== undefined) return error.retryAfterMs;
    return backoffDelay(failures + 1, backoffBaseMs, maxBackoffMs);
  };
  const controller = new AbortController();
  const { signal } = controller;
  let offset: number | undefined;
  /** The offset the server last heard: updates below it are confirmed. */
  let confirmed: number | undefined;
  let failures = 0;
  const attempts = new Map<number, number>();
  /** Tries of the update waiting for the bus, for the pause only. */
  let busWaits = 0;

  const pause = (milliseconds: number) => sleep(milliseconds, signal).catch(() => undefined);

  /** Handles a batch in order; false when it stopped early (abort, or an update to try again). */
  async function handleBatch(updates: unknown[]): Promise<boolean> {
    for (const update of updates) {
      if (signal.aborted) return false;
      const updateId = updateIdOf(update);
      if (updateId === undefined) continue;
      try {
        await options.handle(update, signal);
      } catch (error) {
        if (signal.aborted) return false;
        if (error instanceof BusError && error.code === "unavailable") {
          busWaits += 1;
          logger.warn({ channel: "telegram", updateId, tries: busWaits, error: errorMessage(error) }, "the bus cannot take the telegram update now; will retry");
          await pause(delayAfter(error, busWaits - 1));
          return false;
        }
        const attempt = (attempts.get(updateId) ?? 0) + 1;
        attempts.set(updateId, attempt);
        if (attempt < maxAttempts) {
          logger.warn({ channel: "telegram", updateId, attempt, error: errorMessage(error) }, "telegram update failed; will retry");
          await pause(delayAfter(error, attempt - 1));
          return false;
        }
        logger.error({ channel: "telegram", updateId, attempt, error: errorMessage(error) }, "telegram update failed too often; skipped");
      }
      attempts.delete(updateId);
      busWaits = 0;
      offset = updateId + 1;
    }
    return true;
  }

  async function confirm(): Promise<void> {
    if (offset === undefined || offset === confirmed) return;
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), confirmTimeoutMs);
    try {
      await options.getUpdates({ offset, timeout: 0, limit: 1 }, timeout.signal);
    } catch (error) {
      logger.debug({ channel: "telegram", error: errorMessage(error) }, "telegram could not confirm the last updates; they will be delivered again");
    } finally {
      clearTimeout(timer);
    }
  }

  async function loop(): Promise<void> {
    while (!signal.aborted) {
      let updates: unknown[];
      try {
        const sent = offset;
        updates = await options.getUpdates({ offset, timeout: options.timeoutSeconds }, signal);
        confirmed = sent;
        if (failures > 0) {
          logger.info({ channel: "telegram", failures }, "telegram getUpdates works again");
          options.onConnectionChange?.(true);
        }
        failures = 0;
      } catch (error) {
        if (signal.aborted) break;
        const conflict = error instanceof ChannelError && /\b409\b/.test(error.message);
        const fields = { channel: "telegram", error: errorMessage(error), failures: failures + 1 };
        // One line when an outage starts, not one per retry. 409: a webhook is set or another
        // process polls the same bot; both need an operator.
        if (failures > 0) logger.debug(fields, "telegram getUpdates still failing; retrying");
        else if (conflict) logger.error(fields, "telegram getUpdates conflict: is another gateway polling this bot, or a webhook set?");
        else logger.warn(fields, "telegram getUpdates failed; retrying");
        if (failures === 0) options.onConnectionChange?.(false, `telegram getUpdates fails: ${errorMessage(error)}`);
        await pause(delayAfter(error, failures++));
        continue;
      }
      await handleBatch(updates);
    }
    await confirm();
  }

  const done = loop().catch((error: unknown) => logger.error({ channel: "telegram", error: errorMessage(error) }, "telegram polling crashed"));
  return {
    async stop() {
      controller.abort();
      await done;
    },
  };
}
