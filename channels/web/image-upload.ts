/**
 * Images a web page attaches to a message: sent inside the JSON body as base64 (the API takes JSON
 * only), checked to be the image type they claim by their first bytes, and kept under the
 * channel's media directory as files named by the message id, never by the name the page gave.
 * The agent reads them from there like a photo downloaded from Telegram.
 */
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import type { Media } from "../../src/bus/message.js";

/** Images one message may carry. */
export const MAX_IMAGES = 4;
/** Bytes of one image, decoded. */
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
/** Bytes of a message body besides its images: 32k characters of text, each up to 6 bytes JSON-escaped, and the JSON around it. */
export const MAX_MESSAGE_TEXT_BYTES = 512 * 1024;
/** One image's base64 in the body, with room for a JSON-escaped `\/` now and then. */
export const MAX_IMAGE_RUN_BYTES = Math.ceil(((MAX_IMAGE_BYTES * 4) / 3) * 1.02) + 4;
/** The body limit of a message with the most images of the largest size (base64 is 4/3 of the bytes). */
export const MAX_MESSAGE_BODY_BYTES = MAX_IMAGES * MAX_IMAGE_RUN_BYTES + MAX_MESSAGE_TEXT_BYTES;

const IMAGE_TYPES = {
  "image/png": { extension: ".png", looksLike: (bytes: Buffer) => bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) },
  "image/jpeg": { extension: ".jpg", looksLike: (bytes: Buffer) => bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff },
  "image/gif": { extension: ".gif", looksLike: (bytes: Buffer) => bytes.subarray(0, 4).toString("latin1") === "GIF8" },
  "image/webp": { extension: ".webp", looksLike: (bytes: Buffer) => bytes.subarray(0, 4).toString("latin1") === "RIFF" && bytes.subarray(8, 12).toString("latin1") === "WEBP" },
} as const;
type ImageType = keyof typeof IMAGE_TYPES;

export const ImageUploadSchema = z.strictObject({
  /** The file's name on the sender's machine, shown to the model; not used for the stored file. */
  name: z.string().min(1).max(200).optional(),
  mimeType: z.enum(Object.keys(IMAGE_TYPES) as [ImageType, ...ImageType[]]),
  /** The image's bytes, base64. */
  data: z
    .string()
    .min(4)
    .max(Math.ceil((MAX_IMAGE_BYTES * 4) / 3) + 4, `expected an image of at most ${MAX_IMAGE_BYTES / (1024 * 1024)} MiB`)
    .regex(/^[A-Za-z0-9+/]+={0,2}$/, "expected base64 (the image's bytes, without a data: prefix)"),
});
export type ImageUpload = z.infer<typeof ImageUploadSchema>;

/** Thrown for an image whose bytes are not what its type says: the page's mistake, a 400. */
export class ImageUploadError extends Error {
  override name = "ImageUploadError";
}

/**
 * Writes the images to `<directory>/<messageId>-<n><ext>` and returns them as media. Throws
 * ImageUploadError (naming `images[n]`) when one is not the type it claims; writes nothing then.
 */
export async function saveImages(directory: string, messageId: string, images: readonly ImageUpload[]): Promise<Media[]> {
  const decoded = images.map((image, index) => {
    const bytes = Buffer.from(image.data, "base64");
    const type = IMAGE_TYPES[image.mimeType];
    if (bytes.length > MAX_IMAGE_BYTES) throw new ImageUploadError(`images[${index}].data: expected an image of at most ${MAX_IMAGE_BYTES} bytes, got ${bytes.length}`);
    if (!type.looksLike(bytes)) throw new ImageUploadError(`images[${index}].data: the bytes are not a ${image.mimeType.slice("image/".length).toUpperCase()} image`);
    return { image, bytes, extension: type.extension };
  });
  await mkdir(directory, { recursive: true });
  const safeId = messageId.replace(/[^\w-]/g, "_");
  return Promise.all(
    decoded.map(async ({ image, bytes, extension }, index) => {
      const file = path.join(directory, `${safeId}-${index}${extension}`);
      await writeFile(file, bytes, { mode: 0o600 });
      const media: Media = { path: file, mimeType: image.mimeType, kind: "image" };
      if (image.name !== undefined) media.name = image.name;
      return media;
    }),
  );
}
