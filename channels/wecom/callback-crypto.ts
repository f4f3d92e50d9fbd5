/**
 * WeCom's callback cryptography, through WeCom's own package (`@wecom/crypto`):
 *
 * - the signature: `msg_signature` = SHA-1 of the sorted, joined token, timestamp, nonce and the
 *   encrypted text (the `Encrypt` field of a POST, the `echostr` of a GET), hex; compared here in
 *   constant time;
 * - the envelope: AES-256-CBC, key = Base64(EncodingAESKey + "="), IV = the key's first 16 bytes,
 *   PKCS#7 padding to 32; plaintext = 16 random bytes, the message length (4 bytes, big-endian),
 *   the message, the receive id (the corp id).
 *
 * The package's decrypt does not check what it reads: here the ciphertext must be Base64 of whole
 * AES blocks, and the receive id must be ours, or the envelope is refused.
 */
import { decrypt, getSignature } from "@wecom/crypto";
import { sameSecret } from "../../src/gateway/kit/index.js";

/** A callback that is not WeCom's, or not for this corp. */
export class CallbackRefusal extends Error {
  override name = "CallbackRefusal";
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Whether `signature` is WeCom's signature of `encrypted` with this token, timestamp and nonce. */
export function signatureMatches(token: string, timestamp: string, nonce: string, encrypted: string, signature: string): boolean {
  return sameSecret(signature.toLowerCase(), getSignature(token, timestamp, nonce, encrypted));
}

/** The message inside a signed envelope; throws CallbackRefusal when it cannot be opened or names another corp. */
export function openEnvelope(encryptKey: string, encrypted: string, corpId: string): string {
  if (!BASE64.test(encrypted) || Buffer.from(encrypted, "base64").length % 32 !== 0) throw new CallbackRefusal("the encrypted text is not whole AES blocks");
  let opened: { message: string; id: string };
  try {
    opened = decrypt(encryptKey, encrypted);
  } catch {
    throw new CallbackRefusal("the encrypted text does not decrypt with the EncodingAESKey");
  }
  if (!sameSecret(opened.id, corpId)) throw new CallbackRefusal("the callback is for another corp (receive id)");
  return opened.message;
}
