/**
 * Attachments downloaded with a cap: every platform saves what a user sent (an image, a file, a
 * voice note) under the data directory, and no sender may fill the disk. The announced size is
 * checked first, then the bytes that actually arrive (an announced size may be missing or wrong).
 */
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { OverSizeError, saveStream } from "../../store/file-io.js";

/** A download over its cap: nothing was kept. */
export class TooBigError extends Error {
  override name = "TooBigError";
  constructor(
    readonly maxBytes: number,
    /** The size the platform announced, when it did. */
    readonly bytes?: number,
  ) {
    super(bytes === undefined ? `more than ${maxBytes} bytes` : `${bytes} bytes, over the cap of ${maxBytes}`);
  }
}

export interface SaveDownloadOptions {
  maxBytes: number;
  /** The size the platform announced (a Content-Length, a field of the event). */
  announcedBytes?: number;
  signal?: AbortSignal;
}

/**
 * Saves `source` (a Node stream, or a fetch body) to `target`: the whole file or nothing. Throws
 * TooBigError past the cap (announced or counted), and whatever the source, disk or signal threw.
 */
export async function saveDownload(source: Readable | ReadableStream<Uint8Array>, target: string, options: SaveDownloadOptions): Promise<void> {
  const { maxBytes, announcedBytes, signal } = options;
  const stream = source instanceof Readable ? source : Readable.fromWeb(source as WebReadableStream<Uint8Array>);
  if (announcedBytes !== undefined && Number.isFinite(announcedBytes) && announcedBytes > maxBytes) {
    stream.destroy();
    throw new TooBigError(maxBytes, announcedBytes);
  }
  try {
    await saveStream(stream, target, maxBytes, signal);
  } catch (error) {
    throw error instanceof OverSizeError ? new TooBigError(maxBytes) : error;
  }
}

/** `512 B`, `1.5 KB`, `20 MB`: a size as a person reads it in a note to the chat. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1).replace(/\.0$/, "")} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1).replace(/\.0$/, "")} MB`;
}

/** Letters, digits, `.`, `_` and `-` only, so a sender's file name cannot climb out of the directory. */
export function safeAttachmentName(name: string): string {
  return name.replace(/[^\w.-]+/g, "_").replace(/^\.+/, "_").slice(-100) || "file";
}
