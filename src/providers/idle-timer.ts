/**
 * A timer that aborts a model request when it makes no progress for a while.
 *
 * Both SDKs apply their `timeout` only until the response headers arrive; a stream that stalls
 * afterwards would hang the turn forever. Resetting the timer on every chunk bounds each silence
 * instead of the whole answer, so a long but lively answer is never cut.
 */
export interface IdleTimer {
  /** Aborted once the timer expired or the caller's signal aborted: the one to hand to the SDK. */
  readonly signal: AbortSignal;
  /** Whether the timer fired (as opposed to the caller aborting). */
  readonly expired: boolean;
  /** Progress was made: start counting again. */
  touch(): void;
  /** Pause: the consumer's own pace must not count as server silence. */
  stop(): void;
  /** The request is over: stop, and let go of the caller's signal. */
  dispose(): void;
}

/**
 * One plain AbortController per request, fed by the caller's signal through a listener that
 * `dispose` removes. (Not `AbortSignal.any`: on Node 20 a composite signal with a listener the SDK
 * never removes stays reachable until it aborts, about 2 KB leaked per model call.)
 */
export function startIdleTimer(timeoutMs: number, callerSignal?: AbortSignal): IdleTimer {
  const controller = new AbortController();
  let expired = false;
  let handle: ReturnType<typeof setTimeout> | undefined;
  const onCallerAbort = () => controller.abort(callerSignal?.reason);
  if (callerSignal?.aborted) controller.abort(callerSignal.reason);
  else callerSignal?.addEventListener("abort", onCallerAbort, { once: true });
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
    dispose() {
      clearTimeout(handle);
      callerSignal?.removeEventListener("abort", onCallerAbort);
    },
  };
}
