/**
 * The access token, one for every gateway of the bot: WeCom's gettoken is limited per corp, and a
 * new leader after a failover, or a second gateway fetching files, should use the token the first
 * one fetched. The kit has no key-value store, but it hands every channel a ChatEventLog (Redis
 * when scaled out, shared by every gateway) whose `append` is atomic and says which event came
 * just before: that is enough for a lease, and the log keeps the token itself.
 *
 * One "chat" of the log holds the token's history, as JSON events:
 * - `{kind:"token", token, expiresAt}`: a fetched token;
 * - `{kind:"claim", by, until}`: a process fetches a new one; the others wait for it until `until`;
 * - `{kind:"invalid", token}`: WeCom refused the token before its time (40014, 42001);
 * - `{kind:"release", by}`: the claim ended without a token (gettoken failed).
 *
 * To get the token: read the log; a token valid for more than `marginMs` is used. Otherwise,
 * when nobody holds a claim, append one: when the append's `previous` is the last event read,
 * no other process appended in between and this one fetches; else it reads again, and waits for
 * the claim that came first. Waiters are woken by a broadcast when a token is stored, and read again every
 * `pollMs` in case the broadcast is lost (it is fire-and-forget). The token is kept in the
 * process too, so a valid one costs no Redis read.
 */
import { randomUUID } from "node:crypto";
import type { ChatEventLog, Subscription } from "../../src/gateway/kit/index.js";

export interface TokenSignals {
  broadcast(topic: string, payload: string): Promise<void>;
  onBroadcast(topic: string, handler: (payload: string) => void): Promise<Subscription>;
}

export interface SharedTokenOptions {
  log: ChatEventLog;
  /** The log's chat id for this application's token. */
  key: string;
  /** Asks WeCom for a token. */
  fetchToken(): Promise<{ token: string; expiresInS: number }>;
  signals?: TokenSignals;
  now?: () => number;
  /** A token is fetched anew this long before it expires. Default 5 minutes. */
  marginMs?: number;
  /** How long a claim holds off the others. Default 15 s. */
  claimMs?: number;
  pollMs?: number;
}

export interface SharedToken {
  get(): Promise<string>;
  /** WeCom refused `token`: the next get() fetches another (once, whoever asks). */
  invalidate(token: string): Promise<void>;
  close(): Promise<void>;
}

type TokenEvent =
  | { kind: "token"; token: string; expiresAt: number }
  | { kind: "claim"; by: string; until: number }
  | { kind: "invalid"; token: string }
  | { kind: "release"; by: string };

interface LogState {
  lastId?: string;
  token?: { token: string; expiresAt: number };
  claim?: { by: string; until: number };
}

const TOPIC = "wecom-token";

/**
 * What the log says now. Of two claims the first holds until it ends (a token, a release) or
 * expires: a later claim replaces it only if it was made after the first one's `until`.
 */
function stateOf(events: ReadonlyArray<{ id: string; payload: string }>, claimMs: number): LogState {
  const state: LogState = {};
  for (const { id, payload } of events) {
    state.lastId = id;
    let event: TokenEvent;
    try {
      event = JSON.parse(payload) as TokenEvent;
    } catch {
      continue;
    }
    if (event.kind === "token") {
      state.token = { token: event.token, expiresAt: event.expiresAt };
      delete state.claim;
    } else if (event.kind === "claim") {
      if (!state.claim || state.claim.until <= event.until - claimMs) state.claim = { by: event.by, until: event.until };
    }
    else if (event.kind === "invalid" && state.token?.token === event.token) delete state.token;
    else if (event.kind === "release" && state.claim?.by === event.by) delete state.claim;
  }
  return state;
}

/** Waits for word that a token was stored (a broadcast), or `pollMs`, whichever comes first. */
function createWaker(signals: TokenSignals | undefined, key: string, pollMs: number) {
  const wakers = new Set<() => void>();
  let subscription: Promise<Subscription> | undefined;
  return {
    wait(): Promise<void> {
      subscription ??= signals?.onBroadcast(TOPIC, (payload) => {
        if (payload === key) for (const wake of [...wakers]) wake();
      });
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer);
          wakers.delete(done);
          resolve();
        };
        const timer = setTimeout(done, pollMs);
        wakers.add(done);
      });
    },
    async close(): Promise<void> {
      for (const wake of [...wakers]) wake();
      const current = subscription;
      subscription = undefined;
      await (await current?.catch(() => undefined))?.close();
    },
  };
}

export function createSharedToken(options: SharedTokenOptions): SharedToken {
  const { log, key } = options;
  const now = options.now ?? Date.now;
  const marginMs = options.marginMs ?? 5 * 60_000;
  const claimMs = options.claimMs ?? 15_000;
  const me = randomUUID();
  const waker = createWaker(options.signals, key, options.pollMs ?? 250);
  let local: { token: string; expiresAt: number } | undefined;
  let pending: Promise<string> | undefined;

  const fresh = (token: { expiresAt: number } | undefined) => token !== undefined && now() < token.expiresAt - marginMs;
  const append = (event: TokenEvent) => log.append(key, JSON.stringify(event));

  async function fetchAsHolder(): Promise<string> {
    let fetched: { token: string; expiresInS: number };
    try {
      fetched = await options.fetchToken();
    } catch (error) {
      await append({ kind: "release", by: me }).catch(() => undefined);
      throw error;
    }
    const token = { token: fetched.token, expiresAt: now() + fetched.expiresInS * 1000 };
    await append({ kind: "token", ...token });
    local = token;
    await options.signals?.broadcast(TOPIC, key).catch(() => undefined);
    return token.token;
  }

  async function obtain(): Promise<string> {
    const deadline = now() + claimMs * 3;
    while (now() < deadline) {
      const state = stateOf((await log.since(key, "0-0")).events, claimMs);
      if (state.token && fresh(state.token)) {
        local = state.token;
        return state.token.token;
      }
      if (state.claim && state.claim.until > now() && state.claim.by !== me) {
        await waker.wait();
        continue;
      }
      const claimed = await append({ kind: "claim", by: me, until: now() + claimMs });
      if (claimed.previous === state.lastId) return fetchAsHolder();
      // Another process appended in between: read again.
    }
    // The holders kept failing to store a token: fetch one for this process alone.
    return fetchAsHolder();
  }

  return {
    async get() {
      if (local && fresh(local)) return local.token;
      pending ??= obtain().finally(() => {
        pending = undefined;
      });
      return pending;
    },
    async invalidate(token) {
      if (local?.token === token) local = undefined;
      await append({ kind: "invalid", token });
    },
    close: () => waker.close(),
  };
}
