/**
 * How far behind this process's event loop runs: the longest a 50 ms timer fired late over the
 * last second or so, at most 1 s. A platform call taken from a send budget now leaves the process
 * about that much later (the request waits for the loop), so the send governor counts it from
 * then. One unref'd timer per process, started by the first call.
 */
const TICK_MS = 50;
const MAX_LAG_MS = 1_000;

let started = false;
/** The worst lateness of the current second and of the one before. */
let current = 0;
let previous = 0;

function start(): void {
  started = true;
  let expected = Date.now() + TICK_MS;
  let secondEndsAt = Date.now() + 1_000;
  setInterval(() => {
    const at = Date.now();
    current = Math.max(current, at - expected);
    expected = at + TICK_MS;
    if (at >= secondEndsAt) {
      [previous, current] = [current, 0];
      secondEndsAt = at + 1_000;
    }
  }, TICK_MS).unref();
}

export function eventLoopLagMs(): number {
  if (!started) start();
  return Math.min(MAX_LAG_MS, Math.max(current, previous));
}
