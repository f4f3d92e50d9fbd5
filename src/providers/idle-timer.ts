/**
 * A timer that aborts a model request when it makes no progress for a while.
 *
 * Both SDKs apply their `timeout` only until the response headers arrive; a stream that stalls
 * afterwards would hang the turn forever. Resetting the timer on progress bounds each silence
 * instead of the whole answer, so a long but lively answer is not cut. Progress is content (the
 * providers decide what counts): a server that sends empty keep-alive chunks is silent. And every
 * request also has an overall deadline that nothing resets, so not even a stream of real content
 * that never finishes can hold a turn forever.
 */
/** The overall cap on one model request when none is configured: ten minutes. */
export const DEFAULT_DEADLINE_MS = 600_000;

export interface IdleTimer {
  /** Aborted once the timer expired or the caller's signal aborted: the one to hand to the SDK. */
  readonly signal: AbortSignal;
  /** Whether the timer or the deadline fired (as opposed to the caller aborting). */
  readonly expired: boolean;
  /** Which limit fired, for the error message; undefined until one did. */
  readonly expiredBecause: string | undefined;
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
export function startIdleTimer(timeoutMs: number, callerSignal?: AbortSignal, deadlineMs?: number): IdleTimer {
  const controller = new AbortController();
  let expiredBecause: string | undefined;
  let handle: ReturnType<typeof setTimeout> | undefined;
  const expire = (because: string) => {
    if (expiredBecause !== undefined) return;
    expiredBecause = because;
    clearTimeout(handle);
    clearTimeout(deadline);
    controller.abort(new Error(because));
  };
  const onCallerAbort = () => controller.abort(callerSignal?.reason);
  if (callerSignal?.aborted) controller.abort(callerSignal.reason);
  else callerSignal?.addEventListener("abort", onCallerAbort, { once: true });
  const arm = () => {
    handle = setTimeout(() => expire(`no response for ${timeoutMs} ms`), timeoutMs);
  };
  arm();
  const deadline = deadlineMs === undefined ? undefined : setTimeout(() => expire(`no complete answer within the ${deadlineMs} ms deadline`), deadlineMs);
  return {
    signal: controller.signal,
    get expired() {
      return expiredBecause !== undefined;
    },
    get expiredBecause() {
      return expiredBecause;
    },
    touch() {
      if (expiredBecause !== undefined) return;
      clearTimeout(handle);
      arm();
    },
    stop() {
      clearTimeout(handle);
    },
    dispose() {
      clearTimeout(handle);
      clearTimeout(deadline);
      callerSignal?.removeEventListener("abort", onCallerAbort);
    },
  };
}
