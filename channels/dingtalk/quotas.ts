/**
 * DingTalk's send limits, for the send governor, and the pacing the capabilities ask for.
 *
 * - The OpenAPI limits each app per API, about 20 calls a second on the standard plan; past it the
 *   answer is HTTP 403 `Forbidden.AccessDenied.QpsLimitForApi` (or `…ForAppkeyAndApi`), and
 *   DingTalk's advice is to wait a second. Messages (batchSend, groupMessages/send, a card's
 *   creation) and card updates are separate APIs, each with its own budget.
 * - A robot may post 20 messages a minute into one group (DingTalk's documented limit for group
 *   robots); a session webhook over it answers errcode 130101 "send too fast".
 * - A batchSend names the users DingTalk held back in `flowControlledStaffIdList`.
 * DingTalk has no typing indicator and no drafts: only sends and edits (card updates) count.
 */
import { defineQuotas } from "../../src/gateway/kit/index.js";

export const dingtalkQuotas = defineQuotas({
  scopes: {
    group: { per: "group", limit: 20, windowMs: 60_000, calls: ["send"], note: "DingTalk: a robot posts at most 20 messages a minute into a group." },
    messages: { per: "account", limit: 20, windowMs: 1_000, calls: ["send"], note: "DingTalk: about 20 calls a second per app to the message APIs." },
    cards: { per: "account", limit: 20, windowMs: 1_000, calls: ["edit"], note: "DingTalk: about 20 calls a second per app to the card streaming API." },
  },
});

/** Waits after a refusal, where DingTalk names none: its advice after a QPS refusal, and most of a minute after "send too fast". */
export const retryAfter = { qpsMs: 1_000, sendTooFastMs: 20_000 } as const;

/** Least time between two platform calls into one chat: a burst of split parts stays under the per-group rate. */
export const MIN_SEND_INTERVAL_MS = 1_000;

/** Least time between two streamed card updates of one reply. */
export const DRAFT_INTERVAL_MS = 1_000;

/**
 * Longest reply text, in characters of the rendered Markdown. DingTalk states no limit for a
 * robot's Markdown message; clients cut long ones short, so a reply is split well before that.
 */
export const MAX_MESSAGE_LENGTH = 4_000;
