/**
 * A body limit that knows where images may come. A route that takes images as base64 inside its
 * JSON (the web chat's `POST /api/chat/:chatId/messages`) needs a body limit the size of its most
 * and largest images, but everything else in the body is small: without a closer look, a 10 MB
 * body of text would be read and parsed whole before validation refused it.
 *
 * The gate reads the bytes as they arrive, before any parsing, and sorts them into long runs of
 * base64 characters (an image's `data`; at least {@link IMAGE_RUN_MIN_BYTES}) and the rest. It ends
 * the request with a 413 as soon as the rest is over `textBytes`, a run is longer than one image
 * may be, or there are more runs than images. A text that happens to be base64-like (`aaaa...`)
 * counts as an image run, so it is bounded by the image limits: nothing the route could not take
 * is read further than that. One pass over each byte, no buffering of its own.
 */
import { Transform, type TransformCallback } from "node:stream";

export interface ImageBodyLimits {
  /** Bytes of everything but the images: the JSON, the text, small runs. */
  textBytes: number;
  /** Images one body may carry. */
  images: number;
  /** Longest run one image may be (its base64 with a little slack). */
  imageRunBytes: number;
}

/** Runs shorter than this are text (a word, a token, a short id), counted against `textBytes`. */
export const IMAGE_RUN_MIN_BYTES = 16 * 1024;

/** The error the gate ends a request with: Fastify answers it with its status and message. */
export class BodyTooLargeError extends Error {
  override name = "BodyTooLargeError";
  readonly statusCode = 413;
  readonly code = "FST_ERR_CTP_BODY_TOO_LARGE";
}

// A-Z a-z 0-9 + / = and the backslash of a JSON-escaped `\/`.
const BASE64 = new Uint8Array(256);
for (const character of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\\") BASE64[character.charCodeAt(0)] = 1;

/** A pass-through stream that fails with {@link BodyTooLargeError} once the body cannot fit `limits`. */
export function createImageBodyGate(limits: ImageBodyLimits): Transform & { receivedEncodedLength: number } {
  let text = 0;
  let run = 0;
  let images = 0;
  let failed = false;
  const endRun = () => {
    if (run >= IMAGE_RUN_MIN_BYTES) images += 1;
    else text += run;
    run = 0;
  };
  const refusal = (): string | undefined => {
    if (run > limits.imageRunBytes) return `an image (a base64 run) is longer than the ${limits.imageRunBytes} bytes one image may take`;
    if (images > limits.images) return `more than ${limits.images} images`;
    if (text + (run < IMAGE_RUN_MIN_BYTES ? run : 0) > limits.textBytes) return `more than ${limits.textBytes} bytes besides the images`;
    return undefined;
  };
  const gate = new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      if (failed) return callback();
      gate.receivedEncodedLength += chunk.length;
      for (let index = 0; index < chunk.length; index += 1) {
        if (BASE64[chunk[index]!] === 1) {
          run += 1;
        } else {
          endRun();
          text += 1;
        }
      }
      const reason = refusal();
      if (reason === undefined) return callback(null, chunk);
      failed = true;
      callback(new BodyTooLargeError(`body too large: ${reason}`));
    },
    flush(callback: TransformCallback) {
      endRun();
      const reason = refusal();
      callback(reason === undefined ? null : new BodyTooLargeError(`body too large: ${reason}`));
    },
  }) as Transform & { receivedEncodedLength: number };
  gate.receivedEncodedLength = 0;
  return gate;
}
