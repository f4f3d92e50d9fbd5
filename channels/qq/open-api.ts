/**
 * The QQ OpenAPI calls the channel makes, over fetch: the app's access token (`POST tokenUrl` with
 * `{appId, clientSecret}` → `{access_token, expires_in}`, seconds as a string), cached until a
 * minute before it expires (QQ hands out a new one in the last minute), one request at a time and
 * bought anew when QQ refuses it; JSON calls with `Authorization: QQBot <token>` and
 * `X-Union-Appid`. Every failure leaves as a ChannelError (qq-errors.ts), scrubbed; a refusal's
 * details stay on its `cause` (a {@link QQApiFailure}) for the sender to read.
 */
import { ChannelError } from "../../src/errors.js";
import { AccessTokenCache, type FetchedToken, requestJson } from "../../src/gateway/kit/index.js";
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

export function createQQApi(options: QQApiOptions): QQApi {
  const root = options.apiRoot.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 15_000;
  const { scrub } = options.scrubber;
  const tokens = new AccessTokenCache(() => buyToken(options, timeoutMs), REFRESH_MARGIN_MS, options.now ?? Date.now);

  async function call<T>(operation: string, method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const used = await tokens.get();
      try {
        const answer = await requestJson(
          `${root}${path}`,
          {
            method,
            headers: { "content-type": "application/json", authorization: `QQBot ${used}`, "x-union-appid": options.appId },
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          },
          timeoutMs,
        );
        const failure = failureOf(answer.status, answer.body, answer.retryAfter);
        if (failure && attempt === 1 && (failure.status === 401 || (failure.code >= 11241 && failure.code <= 11244))) {
          // Expired or revoked before its time: buy a new one and try once more.
          tokens.invalidate(used);
          continue;
        }
        if (failure) throw failure;
        return answer.body as T;
      } catch (error) {
        throw toChannelError(error, operation, scrub);
      }
    }
  }

  return { accessToken: () => tokens.get(), call };
}

/** `POST tokenUrl` with `{appId, clientSecret}`; the token joins the scrubber before anyone sees it. */
async function buyToken(options: QQApiOptions, timeoutMs: number): Promise<FetchedToken> {
  const { scrub } = options.scrubber;
  try {
    const answer = await requestJson(
      options.tokenUrl,
      { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ appId: options.appId, clientSecret: options.appSecret }) },
      timeoutMs,
    );
    const failure = failureOf(answer.status, answer.body, answer.retryAfter);
    const { access_token: value, expires_in: expiresIn } = answer.body as { access_token?: unknown; expires_in?: unknown };
    if (failure || typeof value !== "string" || value === "") {
      const said = failure ? `${failure.status} ${failure.code} ${failure.message}` : "no access_token in the answer";
      throw new ChannelError(scrub(`qq getAppAccessToken refused the AppID and AppSecret: ${said}`), "qq", { kind: failure && failure.status >= 500 ? "network" : "auth" });
    }
    options.scrubber.add(value);
    const seconds = Number(expiresIn);
    return { value, expiresInMs: (Number.isFinite(seconds) && seconds > 0 ? seconds : 7_200) * 1000 };
  } catch (error) {
    throw toChannelError(error, "getAppAccessToken", scrub);
  }
}
