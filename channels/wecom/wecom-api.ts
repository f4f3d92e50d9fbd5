/**
 * The WeCom server API calls the channel makes, over fetch: `GET /cgi-bin/gettoken?corpid&corpsecret`
 * (through the shared token, shared-token.ts), JSON POSTs with `?access_token=`, and
 * `GET /cgi-bin/media/get` for what users send. A call whose token WeCom refuses (40014, 42001)
 * marks it invalid for every gateway and is made once more with a new one. WeCom publishes no
 * Node client for these routes; they are three.
 *
 * Every failure leaves as a ChannelError (wecom-errors.ts), scrubbed.
 */
import { ChannelError } from "../../src/errors.js";
import type { SharedToken } from "./shared-token.js";
import { TOKEN_REFUSED, WeComApiFailure, type WeComScrubber, failureOf, toChannelError } from "./wecom-errors.js";

export interface WeComApiOptions {
  /** e.g. https://qyapi.weixin.qq.com */
  apiRoot: string;
  scrubber: WeComScrubber;
  /** Longest wait for one answer. Default 15 s. */
  timeoutMs?: number;
}

export interface WeComApi {
  accessToken(): Promise<string>;
  /** One JSON call; resolves with the answer once its errcode is 0. */
  call<T>(operation: string, path: string, body: unknown): Promise<T>;
  /** The bytes of a media id; the answer's body is the caller's to read or cancel. */
  media(mediaId: string, signal: AbortSignal): Promise<Response>;
}

async function bodyOf(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { errmsg: text.slice(0, 200) };
  }
}

/** Asks WeCom for an access token with the corp id and the application's Secret. */
export async function fetchAccessToken(apiRoot: string, corpId: string, secret: string, scrubber: WeComScrubber, timeoutMs = 15_000): Promise<{ token: string; expiresInS: number }> {
  try {
    const url = `${apiRoot.replace(/\/+$/, "")}/cgi-bin/gettoken?corpid=${encodeURIComponent(corpId)}&corpsecret=${encodeURIComponent(secret)}`;
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const body = await bodyOf(response);
    const failure = failureOf(response.status, body);
    if (failure) throw failure;
    const { access_token: token, expires_in: expires } = body as { access_token?: unknown; expires_in?: unknown };
    if (typeof token !== "string" || token === "") throw new ChannelError("wecom gettoken answered without an access_token", "wecom");
    scrubber.add(token);
    return { token, expiresInS: typeof expires === "number" && expires > 0 ? expires : 7_200 };
  } catch (error) {
    throw toChannelError(error, "gettoken", scrubber.scrub);
  }
}

export function createWeComApi(options: WeComApiOptions & { token: SharedToken }): WeComApi {
  const root = options.apiRoot.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 15_000;
  const { scrub } = options.scrubber;

  async function accessToken(): Promise<string> {
    const token = await options.token.get();
    options.scrubber.add(token);
    return token;
  }

  /** Runs `attempt` with a token; once more with a new one when WeCom refused the first. */
  async function withToken<T>(operation: string, attempt: (token: string) => Promise<T>): Promise<T> {
    for (let round = 1; ; round++) {
      const used = await accessToken();
      try {
        return await attempt(used);
      } catch (error) {
        if (error instanceof WeComApiFailure && TOKEN_REFUSED.has(error.errcode) && round === 1) {
          await options.token.invalidate(used);
          continue;
        }
        throw toChannelError(error, operation, scrub);
      }
    }
  }

  function call<T>(operation: string, path: string, body: unknown): Promise<T> {
    return withToken(operation, async (token) => {
      const response = await fetch(`${root}${path}?access_token=${encodeURIComponent(token)}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const answer = await bodyOf(response);
      const failure = failureOf(response.status, answer);
      if (failure) throw failure;
      return answer as T;
    });
  }

  function media(mediaId: string, signal: AbortSignal): Promise<Response> {
    return withToken("media/get", async (token) => {
      const url = `${root}/cgi-bin/media/get?access_token=${encodeURIComponent(token)}&media_id=${encodeURIComponent(mediaId)}`;
      const response = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs * 4)]) });
      // A refusal comes as JSON; the media itself as its own type.
      if (!response.ok || response.headers.get("content-type")?.includes("json")) {
        const failure = failureOf(response.status, await bodyOf(response));
        throw failure ?? new WeComApiFailure(response.status, -1, "media/get answered JSON without an errcode");
      }
      return response;
    });
  }

  return { accessToken, call, media };
}
