/**
 * An app access token as the open platforms hand them out (DingTalk, QQ): fetched with the app's
 * credentials, good for a stated time, and bought anew a margin before it runs out. One request at
 * a time: callers that arrive while a token is being fetched wait for that one, instead of each
 * buying their own (the platforms count token requests, and a newer token may end an older one).
 * A call the platform refuses as unauthorized before the token's time gives it back with
 * `invalidate`, so the next `get` fetches a fresh one.
 */

/** A token as the platform answered it. */
export interface FetchedToken {
  value: string;
  /** How long the platform says it is good for. */
  expiresInMs: number;
}

export class AccessTokenCache {
  private token: { value: string; expiresAt: number } | undefined;
  private pending: Promise<string> | undefined;

  /**
   * @param fetchToken buys a token; what it throws reaches every caller waiting for it.
   * @param refreshMarginMs how long before its stated end a token is bought anew.
   */
  constructor(
    private readonly fetchToken: () => Promise<FetchedToken>,
    private readonly refreshMarginMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The cached token while it is fresh; otherwise the one being fetched (fetching it when none is). */
  get(): Promise<string> {
    const token = this.token;
    if (token && this.now() < token.expiresAt - this.refreshMarginMs) return Promise.resolve(token.value);
    this.pending ??= this.fetchToken()
      .then(({ value, expiresInMs }) => {
        this.token = { value, expiresAt: this.now() + expiresInMs };
        return value;
      })
      .finally(() => {
        this.pending = undefined;
      });
    return this.pending;
  }

  /** The platform refused `used` before its time: forgotten, unless a newer token already replaced it. */
  invalidate(used: string): void {
    if (this.token?.value === used) this.token = undefined;
  }
}
