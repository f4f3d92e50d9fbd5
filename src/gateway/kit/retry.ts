/**
 * Retries with capped exponential back-off and jitter, cut short by a signal: an adapter handing an
 * event to the bus (which may be briefly unable to take it), a connector reconnecting. One loop for
 * every platform instead of one per adapter.
 */

export interface RetryOptions {
  /** Attempts in all, the first included. Default Infinity (until the signal aborts). */
  attempts?: number;
  /** Pause after the first failure, doubled after each one. Default 500 ms. */
  baseDelayMs?: number;
  /** Longest pause. Default 30 s. */
  maxDelayMs?: number;
  /** Share of each pause drawn at random (0–1), so many retries do not fall in step. Default 0.2. */
  jitter?: number;
  /** Whether a failure is worth another attempt. Default: every failure is. */
  retryable?: (error: unknown) => boolean;
  /** Told of each failure that will be tried again, with the attempt that failed and the pause before the next. */
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
  /** Aborting ends the waiting at once: the last failure is thrown. */
  signal?: AbortSignal;
  /** Waits, injected for tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  random?: () => number;
}

/** The pause before attempt `attempt + 1` (1-based `attempt`), without jitter. */
export function backoffDelay(attempt: number, baseDelayMs = 500, maxDelayMs = 30_000): number {
  return Math.min(baseDelayMs * 2 ** Math.min(attempt - 1, 30), maxDelayMs);
}

/** Runs `operation` until it succeeds, the attempts run out, a failure is not retryable or the signal aborts. */
export async function withRetries<T>(operation: (attempt: number) => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const attempts = options.attempts ?? Number.POSITIVE_INFINITY;
  const jitter = options.jitter ?? 0.2;
  const random = options.random ?? Math.random;
  const wait = options.sleep ?? abortableSleep;
  for (let attempt = 1; ; attempt++) {
    try {
      return await operation(attempt);
    } catch (error) {
      if (attempt >= attempts || options.signal?.aborted || !(options.retryable?.(error) ?? true)) throw error;
      const base = backoffDelay(attempt, options.baseDelayMs, options.maxDelayMs);
      const delayMs = Math.round(base * (1 - jitter + 2 * jitter * random()));
      options.onRetry?.(error, attempt, delayMs);
      try {
        await wait(delayMs, options.signal);
      } catch {
        throw error;
      }
      if (options.signal?.aborted) throw error;
    }
  }
}

function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
