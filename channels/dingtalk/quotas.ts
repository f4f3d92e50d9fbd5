/**
 * DingTalk's quotas, in one place, for the send governor once the kit has one (until then the
 * capabilities below pace each chat and rate-limit answers are waited out).
 *
 * - The OpenAPI limits each app per API (about 20 calls a second on the standard plan): past it
 *   the answer is HTTP 403 `Forbidden.AccessDenied.QpsLimitForApi` (or `…ForAppkeyAndApi`), and
 *   DingTalk's advice is to wait a second. Sending messages and streaming card updates are
 *   separate APIs, each with its own budget.
 * - A robot may post about 20 messages a minute into one group (DingTalk's documented limit for
 *   group robots); a session webhook over it answers errcode 130101 "send too fast".
 * - A batchSend names the users DingTalk held back in `flowControlledStaffIdList`.
 */
export const dingtalkQuotas = {
  /** Calls per second per app and API (messages, card updates, downloads each count apart). */
  apiCallsPerSecond: 20,
  /** Messages per minute a robot may post into one group. */
  groupMessagesPerMinute: 20,
  /** What DingTalk advises after a QPS refusal. */
  qpsRetryAfterMs: 1_000,
  /** A "send too fast" (130101) refusal is per minute: wait a good part of one. */
  sendTooFastRetryAfterMs: 20_000,
} as const;

/** Least time between two platform calls into one chat: a burst of split parts stays under the per-group rate. */
export const MIN_SEND_INTERVAL_MS = 1_000;

/** Least time between two streamed card updates of one reply. */
export const DRAFT_INTERVAL_MS = 1_000;

/**
 * Longest reply text, in characters of the rendered Markdown. DingTalk states no limit for a
 * robot's Markdown message; clients cut long ones short, so a reply is split well before that.
 */
export const MAX_MESSAGE_LENGTH = 4_000;
