/**
 * WeCom's send limits, for the send governor, and the pacing the capabilities ask for.
 *
 * - An application may send one member at most 30 messages a minute; what goes over is dropped by
 *   WeCom (errcode 45009 / 45033 answer a call over the API's frequency or concurrency limits).
 * - Each corp may call one API at most 10,000 times a minute (the corp-wide frequency limit of
 *   the server API).
 * WeCom shows applications no typing indicator and messages cannot be edited: only sends count.
 */
import { defineQuotas } from "../../src/gateway/kit/index.js";

export const wecomQuotas = defineQuotas({
  scopes: {
    member: { per: "chat", limit: 30, windowMs: 60_000, calls: ["send"], note: "WeCom: an application sends one member at most 30 messages a minute." },
    api: { per: "account", limit: 10_000, windowMs: 60_000, calls: ["send"], note: "WeCom: a corp calls one server API at most 10,000 times a minute." },
  },
});

/** Wait after a frequency refusal (45009, 45033): WeCom names none. */
export const RETRY_AFTER_MS = 2_000;

/** Least time between two messages to one chat: a burst of split parts stays under the per-member rate. */
export const MIN_SEND_INTERVAL_MS = 1_000;

/**
 * Longest reply, in UTF-8 bytes: the application message API takes a `markdown` or `text`
 * content of at most 2048 bytes (a Chinese character is three). A little is kept in hand.
 */
export const MAX_MESSAGE_BYTES = 2_000;

/** Longest reply of the intelligent robot, in UTF-8 bytes: a pushed Markdown message takes at most 4096. */
export const ROBOT_MAX_MESSAGE_BYTES = 4_000;
