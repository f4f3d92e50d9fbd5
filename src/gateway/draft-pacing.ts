/**
 * How a streamed reply's drafts degrade when the platform's budgets run low, so that drafts never
 * cost a final its place:
 *
 * 1. Room above the reserves: a draft every `draftIntervalMs` (the platform's pace), with the
 *    newest text; after a degraded stretch the interval comes back down, halving per draft shown.
 * 2. A budget low (the governor's `low`: only the reserve for finals is left): the draft is not
 *    shown and the interval doubles, up to `maxIntervalMs`: fewer, larger edits, as the text keeps
 *    growing meanwhile.
 * 3. A budget closed (a 429 closed it, or a final waits for it): no more drafts of this reply; the
 *    final shows all of it.
 *
 * The final itself is never paced here: it goes out through the dispatcher's lane, in order, and
 * waits for its budget as long as it takes.
 */
import type { TryOutcome } from "./send-governor.js";

export interface DraftPace {
  /** Least time between this reply's drafts now. */
  intervalMs: number;
  /** No more drafts until the final. */
  stopped: boolean;
}

/** The default ceiling of a degraded interval: by then a draft shows many seconds of new text at once. */
export const MAX_DRAFT_INTERVAL_MS = 16_000;

export function initialDraftPace(baseIntervalMs: number): DraftPace {
  return { intervalMs: baseIntervalMs, stopped: false };
}

/** The pace after the governor answered a draft's try with `outcome`. */
export function nextDraftPace(pace: DraftPace, outcome: TryOutcome, baseIntervalMs: number, maxIntervalMs = MAX_DRAFT_INTERVAL_MS): DraftPace {
  if (pace.stopped || outcome === "closed") return { intervalMs: pace.intervalMs, stopped: true };
  if (outcome === "low") return { intervalMs: Math.min(maxIntervalMs, Math.max(baseIntervalMs, pace.intervalMs * 2)), stopped: false };
  return { intervalMs: Math.max(baseIntervalMs, Math.floor(pace.intervalMs / 2)), stopped: false };
}
