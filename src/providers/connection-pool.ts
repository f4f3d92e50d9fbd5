/**
 * The HTTP connections of one provider: a keep-alive pool of its own (an undici Agent handed to
 * the SDK's fetch), so model calls reuse warm connections instead of each paying a TCP (and TLS)
 * handshake, and a burst of calls to one provider does not share a pool with anything else.
 *
 * Idle connections stay open for 30 s (or less, as the server's Keep-Alive header says) and never
 * keep the process alive. No timeouts of the pool's own: the provider bounds every request (the
 * SDK's `timeout` until the headers, then the idle timer and the overall deadline, ./idle-timer.ts).
 */
import { Agent } from "undici";

/** How long an idle connection is kept for the next call. */
const KEEP_ALIVE_MS = 30_000;

/** `fetchOptions` for the SDKs: every request of the provider goes through its own pool. */
export function connectionPool(): { dispatcher: Agent } {
  return {
    dispatcher: new Agent({
      keepAliveTimeout: KEEP_ALIVE_MS,
      keepAliveMaxTimeout: 10 * 60_000,
      headersTimeout: 0,
      bodyTimeout: 0,
    }),
  };
}
