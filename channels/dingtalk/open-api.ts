/**
 * The DingTalk OpenAPI calls the channel makes, over fetch: the app's access token
 * (`POST /v1.0/oauth2/accessToken` with the appKey and appSecret, cached until five minutes before
 * it expires, one request at a time, fetched anew when DingTalk refuses it), JSON calls with the
 * token in `x-acs-dingtalk-access-token`, session-webhook posts (their URL is their credential) and
 * downloads of temporary file URLs. The Stream SDK has no OpenAPI client, and Alibaba's generated
 * one is a large dependency for five routes, so these few calls are made here.
 *
 * Every failure leaves as a ChannelError (dingtalk-errors.ts), scrubbed.
 */
import { ChannelError } from "../../src/errors.js";
import { AccessTokenCache, type FetchedToken, requestJson } from "../../src/gateway/kit/index.js";
import { DingTalkApiFailure, type DingTalkScrubber, failureOf, toChannelError } from "./dingtalk-errors.js";

export interface DingTalkApiOptions {
  /** e.g. https://api.dingtalk.com */
  apiRoot: string;
  appKey: string;
  /** Secret: sent only in the token request's body. */
  appSecret: string;
  scrubber: DingTalkScrubber;
  now?: () => number;
  /** Longest wait for one answer. Default 15 s. */
  timeoutMs?: number;
}

export interface DingTalkApi {
  accessToken(): Promise<string>;
  /** One OpenAPI call; resolves with the answer's JSON body. */
  call<T>(operation: string, method: "POST" | "PUT", path: string, body: unknown): Promise<T>;
  /** Posts to a session webhook; resolves once DingTalk said `errcode: 0`. */
  postWebhook(operation: string, url: string, body: unknown): Promise<void>;
  /** GETs a temporary download URL; the answer's body is the caller's to read or cancel. */
  download(url: string, signal: AbortSignal): Promise<Response>;
}

const REFRESH_MARGIN_MS = 5 * 60_000;

export function createDingTalkApi(options: DingTalkApiOptions): DingTalkApi {
  const root = options.apiRoot.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 15_000;
  const { scrub } = options.scrubber;
  const request = (url: string, init: RequestInit) => requestJson(url, init, timeoutMs);
  const tokens = new AccessTokenCache(() => fetchToken(root, options, timeoutMs), REFRESH_MARGIN_MS, options.now ?? Date.now);

  async function call<T>(operation: string, method: "POST" | "PUT", path: string, body: unknown): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const used = await tokens.get();
      try {
        const answer = await request(`${root}${path}`, {
          method,
          headers: { "content-type": "application/json", "x-acs-dingtalk-access-token": used },
          body: JSON.stringify(body),
        });
        const failure = failureOf(answer.status, answer.body, answer.retryAfter);
        if (failure?.status === 401 && attempt === 1) {
          // Expired or revoked before its time: fetch a new one and try once more.
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

  async function postWebhook(operation: string, url: string, body: unknown): Promise<void> {
    try {
      const answer = await request(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      const failure = failureOf(answer.status, answer.body, answer.retryAfter);
      if (failure) throw failure;
    } catch (error) {
      throw toChannelError(error, operation, scrub);
    }
  }

  return { accessToken: () => tokens.get(), call, postWebhook, download: (url, signal) => download(url, signal, timeoutMs, scrub) };
}

/** `POST /v1.0/oauth2/accessToken` with the app key and secret; the token joins the scrubber before anyone sees it. */
async function fetchToken(root: string, options: DingTalkApiOptions, timeoutMs: number): Promise<FetchedToken> {
  try {
    const answer = await requestJson(
      `${root}/v1.0/oauth2/accessToken`,
      { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ appKey: options.appKey, appSecret: options.appSecret }) },
      timeoutMs,
    );
    const failure = failureOf(answer.status, answer.body, answer.retryAfter);
    if (failure) throw failure;
    const { accessToken, expireIn } = answer.body as { accessToken?: unknown; expireIn?: unknown };
    if (typeof accessToken !== "string" || accessToken === "") throw new ChannelError("dingtalk accessToken answered without a token", "dingtalk");
    options.scrubber.add(accessToken);
    const seconds = typeof expireIn === "number" && expireIn > 0 ? expireIn : 7_200;
    return { value: accessToken, expiresInMs: seconds * 1000 };
  } catch (error) {
    throw toChannelError(error, "accessToken", options.scrubber.scrub);
  }
}

/** GETs a temporary download URL (four times the call timeout); a refusal's body is cancelled. */
async function download(url: string, signal: AbortSignal, timeoutMs: number, scrub: DingTalkScrubber["scrub"]): Promise<Response> {
  try {
    const response = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs * 4)]) });
    if (!response.ok) {
      await response.body?.cancel();
      throw new DingTalkApiFailure(response.status, String(response.status), "download refused");
    }
    return response;
  } catch (error) {
    throw toChannelError(error, "download", scrub);
  }
}
