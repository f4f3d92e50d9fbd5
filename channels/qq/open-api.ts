/**
 * The QQ OpenAPI calls the channel makes, over fetch: the app's access token (`POST tokenUrl` with
 * `{appId, clientSecret}` → `{access_token, expires_in}`, seconds as a string), cached until a
 * minute before it expires (QQ hands out a new one in the last minute), one request at a time and
 * bought anew when QQ refuses it; JSON calls with `Authorization: QQBot <token>` and
 * `X-Union-Appid`. Every failure leaves as a ChannelError (qq-errors.ts), scrubbed; a refusal's
 * details stay on its `cause` (a {@link QQApiFailure}) for the sender to read.
 */
import { ChannelError } from "../../src/errors.js";
import { type QQScrubber, failureOf, toChannelError } from "./qq-errors.js";

export interface QQApiOptions {
  apiRoot: string;
  tokenUrl: string;
  appId: string;
  /** Secret: sent only in the token request's body. */
  appSecret: string;
  scrubber: QQScrubber;
  now?: () => number;
  /** Longest wait for one answer. Default 15 s. */
  timeoutMs?: number;
}

export interface QQApi {
  accessToken(): Promise<string>;
  /** One OpenAPI call; resolves with the answer's JSON body. */
  call<T>(operation: string, method: "GET" | "POST", path: string, body?: unknown): Promise<T>;
}

const REFRESH_MARGIN_MS = 60_000;

async function bodyOf(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { message: text.slice(0, 200) };
  }
}

export function createQQApi(options: QQApiOptions): QQApi {
  const root = options.apiRoot.replace(/\/+$/, "");
  const now = options.now ?? Date.now;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const { scrub } = options.scrubber;
  let token: { value: string; expiresAt: number } | undefined;
  let pending: Promise<string> | undefined;

  async function request(url: string, init: RequestInit): Promise<{ status: number; body: unknown; retryAfter: string | null }> {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    return { status: response.status, body: await bodyOf(response), retryAfter: response.headers.get("retry-after") };
  }

  async function buyToken(): Promise<string> {
    try {
      const answer = await request(options.tokenUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ appId: options.appId, clientSecret: options.appSecret }),
      });
      const failure = failureOf(answer.status, answer.body, answer.retryAfter);
      const { access_token: value, expires_in: expiresIn } = answer.body as { access_token?: unknown; expires_in?: unknown };
      if (failure || typeof value !== "string" || value === "") {
        const said = failure ? `${failure.status} ${failure.code} ${failure.message}` : "no access_token in the answer";
        throw new ChannelError(scrub(`qq getAppAccessToken refused the AppID and AppSecret: ${said}`), "qq", { kind: failure && failure.status >= 500 ? "network" : "auth" });
      }
      options.scrubber.add(value);
      const seconds = Number(expiresIn);
      token = { value, expiresAt: now() + (Number.isFinite(seconds) && seconds > 0 ? seconds : 7_200) * 1000 };
      return value;
    } catch (error) {
      throw toChannelError(error, "getAppAccessToken", scrub);
    }
  }

  async function accessToken(): Promise<string> {
    if (token && now() < token.expiresAt - REFRESH_MARGIN_MS) return token.value;
    pending ??= buyToken().finally(() => {
      pending = undefined;
    });
    return pending;
  }

  async function call<T>(operation: string, method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const used = await accessToken();
      try {
        const answer = await request(`${root}${path}`, {
          method,
          headers: { "content-type": "application/json", authorization: `QQBot ${used}`, "x-union-appid": options.appId },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        const failure = failureOf(answer.status, answer.body, answer.retryAfter);
        if (failure && attempt === 1 && (failure.status === 401 || (failure.code >= 11241 && failure.code <= 11244))) {
          // Expired or revoked before its time: buy a new one and try once more.
          if (token?.value === used) token = undefined;
          continue;
        }
        if (failure) throw failure;
        return answer.body as T;
      } catch (error) {
        throw toChannelError(error, operation, scrub);
      }
    }
  }

  return { accessToken, call };
}
