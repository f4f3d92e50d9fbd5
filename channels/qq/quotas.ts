/**
 * QQ's send limits, for the send governor, and the reply window the sender keeps to.
 *
 * - Passive replies: a message into a group or a one-to-one (C2C) chat names the user message it
 *   answers (`msg_id`) and a sequence number (`msg_seq`); QQ takes such a reply within 5 minutes
 *   of that message and at most 5 replies to one message. A guild channel's reply names the
 *   message too, within 5 minutes, with no count.
 * - Active messages (no `msg_id`): QQ no longer lets most bots send them into groups and C2C chats,
 *   and caps them per day in guild channels; the channel sends one only where the config allows.
 * - Rates: QQ answers HTTP 429 (or its frequency error codes) when calls come too fast; it names
 *   no per-second figure for bots, so the budgets below are a conservative pace of our own, and a
 *   deployment that knows its bot's figures sets them in `channels.qq.limits`.
 * QQ has no typing indicator for bots and no edits: only sends count.
 */
import { defineQuotas } from "../../src/gateway/kit/index.js";

export const qqQuotas = defineQuotas({
  scopes: {
    chat: { per: "chat", limit: 5, windowMs: 1_000, calls: ["send"], note: "A pace of our own: at most 5 messages a second into one chat." },
    group: { per: "group", limit: 20, windowMs: 60_000, calls: ["send"], note: "A pace of our own: at most 20 messages a minute into one group or channel." },
    bot: { per: "account", limit: 20, windowMs: 1_000, calls: ["send"], note: "A pace of our own: about 20 calls a second for the whole bot." },
  },
});

/** How long after a user's message QQ takes a passive reply to it. */
export const REPLY_WINDOW_MS = 5 * 60_000;

/** Passive replies QQ takes to one message in a group or C2C chat. */
export const REPLIES_PER_MESSAGE = 5;

/** Wait after a refusal that names none. */
export const DEFAULT_RETRY_AFTER_MS = 1_000;

/** Least time between two platform calls into one chat. */
export const MIN_SEND_INTERVAL_MS = 250;

/**
 * Longest reply text, in characters. QQ states no limit for a text message; clients fold long
 * ones, and every part of a reply spends one of the 5 replies, so a part is large but bounded.
 */
export const MAX_MESSAGE_LENGTH = 3_000;
