/**
 * A timer that aborts a model request when it makes no progress for a while.
 *
 * Both SDKs apply their `timeout` only until the response headers arrive; a stream that stalls
 * afterwards would hang the turn forever. Resetting the timer on every chunk bounds each silence
 * instead of the whole answer, so a long but lively answer is never cut.
 */
export interface IdleTimer {
  /** Aborted once the timer expired. */
  readonly signal: AbortSignal;
  /** Whether the timer fired (as opposed to the caller aborting). */
  readonly expired: boolean;
  /** Progress was made: start counting again. */
  touch(): void;
  stop(): void;
}

export function startIdleTimer(timeoutMs: number): IdleTimer {
  const controller = new AbortController();
  let expired = false;
  let handle: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    handle = setTimeout(() => {
      expired = true;
      controller.abort(new Error(`no response for ${timeoutMs} ms`));
    }, timeoutMs);
  };
  arm();
  return {
    signal: controller.signal,
    get expired() {
      return expired;
    },
    touch() {
      if (expired) return;
      clearTimeout(handle);
      arm();
    },
    stop() {
      clearTimeout(handle);
    },
  };
}

/** The signal to hand to the SDK: fires on the caller's abort or on the idle timeout. */
export function combineSignals(timer: IdleTimer, signal?: AbortSignal): AbortSignal {
  return signal ? AbortSignal.any([signal, timer.signal]) : timer.signal;
}
