/**
 * WeCom's callback cryptography as WeCom's servers do it, written here from the documentation and
 * independent of the channel's (which uses the `@wecom/crypto` package): a callback this side
 * encrypts and signs and the channel opens proves that the two agree.
 *
 * - signature: SHA-1 over the token, timestamp, nonce and encrypted text, sorted and joined, hex;
 * - key: Base64-decoded EncodingAESKey + "=" (32 bytes), IV: its first 16 bytes;
 * - plaintext: 16 random bytes, the message's length (4 bytes, network order), the message, the
 *   receive id; padded PKCS#7 to a multiple of 32; AES-256-CBC; Base64.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

export function wecomSignature(token: string, timestamp: string, nonce: string, encrypted: string): string {
  return createHash("sha1").update([token, timestamp, nonce, encrypted].sort().join("")).digest("hex");
}

function keyOf(encodingAESKey: string): { key: Buffer; iv: Buffer } {
  const key = Buffer.from(`${encodingAESKey}=`, "base64");
  if (key.length !== 32) throw new Error("an EncodingAESKey is 43 Base64 characters (32 bytes)");
  return { key, iv: key.subarray(0, 16) };
}

export function wecomEncrypt(encodingAESKey: string, message: string, receiveId: string): string {
  const { key, iv } = keyOf(encodingAESKey);
  const body = Buffer.from(message, "utf8");
  const length = Buffer.alloc(4);
  length.writeUInt32BE(body.length, 0);
  const plain = Buffer.concat([randomBytes(16), length, body, Buffer.from(receiveId, "utf8")]);
  const pad = 32 - (plain.length % 32);
  const cipher = createCipheriv("aes-256-cbc", key, iv).setAutoPadding(false);
  return Buffer.concat([cipher.update(Buffer.concat([plain, Buffer.alloc(pad, pad)])), cipher.final()]).toString("base64");
}

/** Opens an envelope, checking the padding and the length strictly. */
export function wecomDecrypt(encodingAESKey: string, encrypted: string): { message: string; receiveId: string } {
  const { key, iv } = keyOf(encodingAESKey);
  const decipher = createDecipheriv("aes-256-cbc", key, iv).setAutoPadding(false);
  const plain = Buffer.concat([decipher.update(Buffer.from(encrypted, "base64")), decipher.final()]);
  const pad = plain[plain.length - 1]!;
  if (pad < 1 || pad > 32 || !plain.subarray(plain.length - pad).every((byte) => byte === pad)) throw new Error("bad padding");
  const content = plain.subarray(0, plain.length - pad);
  const length = content.readUInt32BE(16);
  if (20 + length > content.length) throw new Error("bad length");
  return { message: content.subarray(20, 20 + length).toString("utf8"), receiveId: content.subarray(20 + length).toString("utf8") };
}

/** A fresh EncodingAESKey, as the admin console makes one. */
export function newEncodingAESKey(): string {
  return randomBytes(32).toString("base64").slice(0, 43);
}
