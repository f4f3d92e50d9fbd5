/**
 * Slack's send limits, for the send governor, and the pacing the capabilities ask for.
 *
 * - `chat.postMessage` has its own limit: about one message a second into one channel, short
 *   bursts allowed (a thread posts into its channel: it counts there).
 * - `chat.update` is a Tier 3 method: 50+ calls a minute for an app in a workspace, declared as
 *   5 in any 6 s (never more than 50 in a minute).
 * - Slack allows several hundred messages a minute in a workspace: 5 a second is kept.
 * - Past a limit Slack answers HTTP 429 with `Retry-After` (seconds); the SDK is told to throw it
 *   (`rejectRateLimitedCalls`) so the governor closes that budget for every gateway.
 * Slack shows apps no typing indicator outside the RTM API: only sends and edits count.
 */
import { defineQuotas } from "../../src/gateway/kit/index.js";

export const slackQuotas = defineQuotas({
  scopes: {
    channel: { per: "chat", limit: 1, windowMs: 1_000, calls: ["send"], note: "Slack: chat.postMessage about 1 message per second per channel." },
    // Tier 3 is 50 a minute; 5 in any 6 s never exceeds it, and is a short window: replies streaming
    // at once in several channels share it without starving each other's drafts.
    updates: { per: "account", limit: 5, windowMs: 6_000, calls: ["edit"], note: "Slack: chat.update is Tier 3, 50 calls per minute per workspace (5 per 6 s)." },
    workspace: { per: "account", limit: 5, windowMs: 1_000, calls: ["send"], note: "Slack: chat.postMessage allows several hundred messages a minute per workspace (5 per s)." },
  },
  // `C123:1700000000.000100` (a thread with a session of its own) posts into the channel `C123`.
  platformChatOf: (chatId) => chatId.split(":")[0]!,
});

/** The wait after a 429 that named none. */
export const DEFAULT_RETRY_AFTER_MS = 1_000;

/** Least time between two platform calls into one chat. */
export const MIN_SEND_INTERVAL_MS = 1_000;

/** Least time between two streamed updates of one reply: well inside chat.update's tier. */
export const DRAFT_INTERVAL_MS = 1_500;

/**
 * Longest message text. Slack truncates a message's `text` past 40,000 characters and advises
 * keeping it under 4,000 for display; a reply is split at 3,500 so a streamed one stays readable.
 */
export const MAX_MESSAGE_LENGTH = 3_500;
