/**
 * What Feishu does to an event it posts to a request URL: with an encrypt key set, the body is
 * `{"encrypt": base64(iv ‖ AES-256-CBC(json))}` with the key SHA-256(encrypt key) and a random
 * 16-byte IV, and the request is signed: `X-Lark-Signature` = SHA-256 hex of timestamp + nonce +
 * encrypt key + raw body, with `X-Lark-Request-Timestamp` (seconds) and `X-Lark-Request-Nonce`.
 */
import { createCipheriv, createHash, randomBytes } from "node:crypto";

export interface SignOptions {
  /** The key the body is encrypted with and signed by. */
  encryptKey: string;
  /** Encrypt the body. Default true. */
  encrypt?: boolean;
  /** Encrypt with this key instead (the signature still uses `signKey ?? encryptKey`). */
  encryptWith?: string;
  /** Sign with this key instead; null: send no signature headers. */
  signKey?: string | null;
  /** Seconds since the epoch. Default now. */
  timestamp?: number;
  nonce?: string;
}

export interface SignedRequest {
  headers: Record<string, string>;
  rawBody: string;
}

export function encryptBody(plaintext: string, encryptKey: string): string {
  const key = createHash("sha256").update(encryptKey).digest();
  const iv = randomBytes(16);
  const cipher = createCipheriv("aes-256-cbc", key, iv);
  return Buffer.concat([iv, cipher.update(plaintext, "utf8"), cipher.final()]).toString("base64");
}

export function signature(timestamp: string, nonce: string, encryptKey: string, rawBody: string): string {
  return createHash("sha256").update(timestamp + nonce + encryptKey + rawBody).digest("hex");
}

export function signedRequest(payload: unknown, options: SignOptions): SignedRequest {
  const json = JSON.stringify(payload);
  const rawBody = options.encrypt === false ? json : JSON.stringify({ encrypt: encryptBody(json, options.encryptWith ?? options.encryptKey) });
  const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" };
  if (options.signKey !== null) {
    const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
    const nonce = options.nonce ?? randomBytes(8).toString("hex");
    headers["x-lark-request-timestamp"] = timestamp;
    headers["x-lark-request-nonce"] = nonce;
    headers["x-lark-signature"] = signature(timestamp, nonce, options.signKey ?? options.encryptKey, rawBody);
  }
  return { headers, rawBody };
}
