/**
 * What the open platforms' clients (DingTalk, QQ, WeCom) share when a call fails: a scrubber that
 * also hides the access tokens made from the app's secret as they are issued (a token leaks as
 * much as the secret while it lives), and the mapping of a failure that never reached the
 * platform's API (fetch, a socket, a timeout, our own checks) onto a scrubbed ChannelError. What
 * each platform's API answers is its own to read: that stays in its `<platform>-errors.ts`.
 */
import { ChannelError } from "../../errors.js";
import { type Scrub, createScrubber, scrubError } from "./scrub.js";

/** The scrubber of one app: its fixed secrets and shapes, and the last few access tokens issued. */
export interface IssuedSecretScrubber {
  scrub: Scrub;
  /** Adds a short-lived secret made from the app's (an access token). The last few are kept. */
  add(secret: string): void;
}

/** How many issued tokens are hidden: a token outlives the next one by a margin at most. */
const ISSUED_KEPT = 4;

/** Hides `secrets` and text matching `patterns` (e.g. `access_token=…`), and every token `add`ed later. */
export function createIssuedSecretScrubber(secrets: ReadonlyArray<string | undefined>, patterns: RegExp[]): IssuedSecretScrubber {
  const fixed = createScrubber(secrets, { patterns });
  const issued: string[] = [];
  let dynamic: Scrub = (text) => text;
  return {
    scrub: (text) => dynamic(fixed(text)),
    add(secret) {
      if (issued.includes(secret)) return;
      issued.push(secret);
      if (issued.length > ISSUED_KEPT) issued.shift();
      dynamic = createScrubber(issued);
    },
  };
}

/** Whether a failure is the network's (worth another try): an abort or timeout, a socket or DNS error, undici's own codes. */
export function isNetworkFailure(error: Error): boolean {
  const code = String((error as { code?: unknown }).code ?? (error.cause as { code?: unknown } | undefined)?.code ?? "");
  return error.name === "AbortError" || error.name === "TimeoutError" || /fetch failed|socket|other side closed|network/i.test(error.message) || /^(E[A-Z]+|UND_ERR_\w+)$/.test(code);
}

/** A failure that is not the platform's answer, as a ChannelError `network` or `other`, scrubbed (the cause too). */
export function transportFailure(error: unknown, channel: string, operation: string, scrub: Scrub): ChannelError {
  const failure = error instanceof Error ? error : new Error(String(error));
  scrubError(failure, scrub);
  return new ChannelError(scrub(`${channel} ${operation} failed: ${failure.message}`), channel, { kind: isNetworkFailure(failure) ? "network" : "other", cause: failure });
}
