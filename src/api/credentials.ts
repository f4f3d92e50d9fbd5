/**
 * How a request carries the API token (a Bearer header, or the cookie `/login` sets) and how it is
 * compared: by SHA-256 digests with timingSafeEqual, so the time taken says nothing about the
 * token, not even its length.
 */
import { createHash, timingSafeEqual } from "node:crypto";

/** The cookie a browser keeps the token in after `/login`: HttpOnly, SameSite=Strict. */
export const TOKEN_COOKIE = "countbot_token";

/** How long a browser stays signed in: 30 days. */
export const LOGIN_MAX_AGE_S = 30 * 24 * 60 * 60;

/** The token cookie (an empty value with Max-Age 0 removes it). Secure when the request came over TLS. */
export function tokenCookie(value: string, maxAgeSeconds: number, protocol: string): string {
  const secure = protocol === "https" ? "; Secure" : "";
  return `${TOKEN_COOKIE}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAgeSeconds}${secure}`;
}

export function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}

/**
 * The key a request that passed the token check came with: its bearer token, else its token
 * cookie; undefined when it carried neither (an API without a token). For routes that keep
 * something per key (the OpenAI endpoint's sessions).
 */
export function presentedKey(headers: { authorization?: string; cookie?: string }): string | undefined {
  return bearerOf(headers.authorization) ?? cookieTokenOf(headers.cookie);
}

export function cookieTokenOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const pair = header
    .split(";")
    .map((part) => part.trim())
    .find((part) => part.startsWith(`${TOKEN_COOKIE}=`));
  if (pair === undefined) return undefined;
  try {
    return decodeURIComponent(pair.slice(TOKEN_COOKIE.length + 1));
  } catch {
    return undefined;
  }
}

export function bearerOf(header: string | undefined): string | undefined {
  return /^Bearer[ ]+(\S+)[ ]*$/i.exec(header ?? "")?.[1];
}

/** The token cookie, compared like the bearer header. */
export function cookieMatches(header: string | undefined, expected: Buffer): boolean {
  const value = cookieTokenOf(header);
  return value !== undefined && timingSafeEqual(digest(value), expected);
}

/** Compares digests, so the time taken says nothing about the token, not even its length. */
export function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  const given = bearerOf(header);
  const equal = timingSafeEqual(digest(given ?? ""), expected);
  return given !== undefined && equal;
}

/** Whether the token matches, compared by digests. */
export function tokenMatches(given: string, expected: Buffer): boolean {
  return timingSafeEqual(digest(given), expected);
}
