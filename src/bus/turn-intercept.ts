/**
 * The contract between the turn consumer (src/agent), which claims a session's messages and runs
 * its turns, and the code that answers some messages without the model (src/jobs: `@TeamName goal`
 * and `/team`). It lives beside the message model, not in agent/, so the jobs that implement it
 * (and the gateway process that builds them to start and cancel team runs) need no agent code.
 */
import type { InboundMessage } from "./message.js";
import type { Claim } from "./message-bus.js";

/**
 * A hook for messages that code, not the model, answers. A message it may take is a turn of its
 * own (never coalesced with others), and `take` runs inside that turn, holding the session's lease.
 */
export interface TurnIntercept {
  /** Cheap and synchronous: whether `take` might answer this message. */
  mayTake(message: InboundMessage): boolean;
  /**
   * The reply, when it answers the message itself (it records the exchange in the session's
   * history, fenced by `claim`, so a re-run turn repeats the reply); undefined lets the agent answer.
   */
  take(message: InboundMessage, claim: Claim): Promise<string | undefined>;
}
