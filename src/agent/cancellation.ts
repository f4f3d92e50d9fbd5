/**
 * Why a turn was aborted decides what happens to it. A user's `/stop` ends the turn: what was
 * said is kept and "[stopped]" is the reply. A shutdown is not the user's doing: the turn leaves
 * no trace (no history, no reply) and its messages go back to the bus for another worker.
 */
import { CancelledError } from "../errors.js";

export const shutdownReason = new CancelledError("shutting down");

export function isShutdown(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true && signal.reason === shutdownReason;
}
