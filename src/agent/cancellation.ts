/**
 * Why a turn was aborted decides what happens to it. A user's `/stop` ends the turn: what was
 * said is kept and "[stopped]" is the reply. Anything else is not the user's doing (a shutdown, a
 * lost lease): the turn leaves no trace (no history, no reply) and its messages are answered by
 * whichever worker runs the turn again. Only a user's stop is "[stopped]" in the history.
 */
import { CancelledError } from "../errors.js";

export const shutdownReason = new CancelledError("shutting down");

export function isShutdown(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true && signal.reason === shutdownReason;
}

/** A `/stop` (or the API's cancel): the one abort whose "[stopped]" belongs in the history. */
export function stoppedByUser(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true && signal.reason instanceof CancelledError && signal.reason !== shutdownReason;
}

/** Aborted for any other reason (shutdown, lease lost): the turn must leave no trace. */
export function leavesNoTrace(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true && !stoppedByUser(signal);
}
