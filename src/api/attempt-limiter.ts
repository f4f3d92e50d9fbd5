/**
 * Failed sign-in attempts, limited per client address and for the whole API. Every way a token is
 * presented counts the same: `POST /login`, `GET /login?token=`, a Bearer header, a token cookie.
 * A client past its limit, or any client while the API as a whole is past its limit, is refused
 * with 429 and `Retry-After` before its token is even compared, so a refusal says nothing about
 * whether the token was right.
 *
 * The global limit holds off a guesser with many addresses (IPv6 gives anyone a /64: addresses are
 * counted by their /64). While it holds, a client that signed in successfully within the last day
 * is let through (its own limit still applies), so an attack does not lock the operator out.
 * Each window is logged once when a limit is first reached, not once per refused request.
 *
 * Memory is bounded: at most `maxClients` addresses are tracked; past that, expired ones are
 * dropped, and if none has expired the oldest goes.
 */
import { isIPv6 } from "node:net";

export interface AttemptLimits {
  /** Failed attempts one client address may make per window. Default 10. */
  perClient?: number;
  /** Failed attempts all clients together may make per window. Default 100. */
  global?: number;
  /** Default 60 s. */
  windowMs?: number;
  /** Default 10,000. */
  maxClients?: number;
}

export interface AttemptLimiterOptions extends AttemptLimits {
  now?: () => number;
  /** Called once per window when a limit is first reached. */
  onLimited(report: { scope: "client" | "global"; client: string; failures: number; windowMs: number }): void;
}

export type AttemptVerdict = { allowed: true } | { allowed: false; retryAfterSeconds: number; scope: "client" | "global" };

export interface AttemptLimiter {
  /** Whether `client` may present a token now. */
  check(client: string): AttemptVerdict;
  /** A token `client` presented was wrong. */
  failed(client: string): void;
  /** `client` presented the right token. */
  succeeded(client: string): void;
}

interface Window {
  start: number;
  failures: number;
  reported: boolean;
}

/** How long a successful sign-in exempts a client from the global limit. */
const TRUSTED_FOR_MS = 24 * 60 * 60 * 1000;

export function createAttemptLimiter(options: AttemptLimiterOptions): AttemptLimiter {
  const perClient = options.perClient ?? 10;
  const globalLimit = options.global ?? 100;
  const windowMs = options.windowMs ?? 60_000;
  const maxClients = options.maxClients ?? 10_000;
  const now = options.now ?? Date.now;
  const clients = new Map<string, Window>();
  const trusted = new Map<string, number>();
  let global: Window = { start: now(), failures: 0, reported: false };

  const current = (window: Window | undefined, time: number): Window | undefined => (window && time - window.start < windowMs ? window : undefined);
  const retryAfter = (window: Window, time: number) => Math.max(1, Math.ceil((window.start + windowMs - time) / 1000));

  function bounded<Value>(map: Map<string, Value>, expired: (value: Value) => boolean): void {
    if (map.size < maxClients) return;
    for (const [key, value] of map) if (expired(value)) map.delete(key);
    // Maps iterate in insertion order: the first key is the oldest.
    while (map.size >= maxClients) map.delete(map.keys().next().value!);
  }

  return {
    check(address) {
      const client = clientKey(address);
      const time = now();
      const own = current(clients.get(client), time);
      if (own && own.failures >= perClient) return { allowed: false, retryAfterSeconds: retryAfter(own, time), scope: "client" };
      const all = current(global, time);
      const isTrusted = (trusted.get(client) ?? 0) > time;
      if (all && all.failures >= globalLimit && !isTrusted) return { allowed: false, retryAfterSeconds: retryAfter(all, time), scope: "global" };
      return { allowed: true };
    },
    failed(address) {
      const client = clientKey(address);
      const time = now();
      let own = current(clients.get(client), time);
      if (!own) {
        bounded(clients, (window) => time - window.start >= windowMs);
        own = { start: time, failures: 0, reported: false };
        clients.delete(client);
        clients.set(client, own);
      }
      own.failures += 1;
      if (own.failures >= perClient && !own.reported) {
        own.reported = true;
        options.onLimited({ scope: "client", client, failures: own.failures, windowMs });
      }
      if (!current(global, time)) global = { start: time, failures: 0, reported: false };
      global.failures += 1;
      if (global.failures >= globalLimit && !global.reported) {
        global.reported = true;
        options.onLimited({ scope: "global", client, failures: global.failures, windowMs });
      }
    },
    succeeded(address) {
      const client = clientKey(address);
      const time = now();
      bounded(trusted, (until) => until <= time);
      trusted.delete(client);
      trusted.set(client, time + TRUSTED_FOR_MS);
    },
  };
}

/** An IPv4 address as it is; an IPv6 one by its /64, which one subscriber usually holds whole. */
export function clientKey(address: string): string {
  const plain = address.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, "$1");
  if (!isIPv6(plain)) return plain;
  const [head = "", tail = ""] = plain.toLowerCase().split("::");
  const headGroups = head === "" ? [] : head.split(":");
  const tailGroups = tail === "" ? [] : tail.split(":");
  const groups = plain.includes("::") ? [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill("0"), ...tailGroups] : headGroups;
  return `${groups
    .slice(0, 4)
    .map((group) => group.replace(/^0+(?=.)/, ""))
    .join(":")}::/64`;
}
