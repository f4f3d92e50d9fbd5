/**
 * Downloads a photo, document, voice note or audio file of an inbound message into the download directory, with a size cap.
 * A file over the cap, or one that fails to download, becomes a note for the text instead of media:
 * the message still reaches the model, and nothing here throws except an abort (the adapter stops).
 */
import { mkdir } from "node:fs/promises";
import { extname, join } from "node:path";
import type { Logger } from "pino";
import type { Media } from "../../src/bus/message.js";
import { TooBigError, formatBytes, safeAttachmentName, saveDownload } from "../../src/gateway/kit/index.js";
import type { TelegramFile } from "./update-schema.js";

export interface Attachment {
  fileId: string;
  /** Stable across bots and time: names the downloaded file, so a redelivered update rewrites the same one. */
  uniqueId: string;
  /** The size the message announced, when it did. */
  declaredSize?: number;
  kind: Media["kind"];
  mimeType?: string;
  /** The sender's file name (documents). */
  name?: string;
  /** How the note calls it: `photo`, `document "report.pdf"`. */
  label: string;
  /** How long a voice note or audio file plays, in seconds. */
  durationSeconds?: number;
}

export type DownloadResult = { media: Media } | { note: string };

export interface FileDownloaderOptions {
  /** getFile through the Bot API. */
  getFile(fileId: string, signal: AbortSignal): Promise<TelegramFile>;
  /** The download URL of a file_path (it contains the token: never log it). */
  fileUrl(filePath: string): string;
  fetch: typeof globalThis.fetch;
  downloadDir: string;
  maxFileBytes: number;
  logger: Logger;
  scrub(text: string): string;
}


function extensionOf(filePath: string, kind: Media["kind"]): string {
  const extension = extname(filePath);
  if (/^\.\w{1,10}$/.test(extension)) return extension;
  return kind === "image" ? ".jpg" : "";
}

export function createFileDownloader(options: FileDownloaderOptions) {
  const { maxFileBytes, logger } = options;

  function tooBigNote(attachment: Attachment, bytes: number | undefined): string {
    const size = bytes === undefined ? "it is" : `${formatBytes(bytes)} is`;
    return `[${attachment.label} not downloaded: ${size} over the ${formatBytes(maxFileBytes)} limit]`;
  }

  async function save(url: string, target: string, signal: AbortSignal): Promise<void> {
    const response = await options.fetch(url, { signal });
    if (!response.ok || !response.body) {
      await response.body?.cancel();
      throw new Error(`file download answered ${response.status}`);
    }
    const announcedBytes = Number(response.headers.get("content-length") ?? Number.NaN);
    await saveDownload(response.body, target, { maxBytes: maxFileBytes, announcedBytes, signal });
  }

  /** Downloads the attachment, or explains in a note why it is not there. Rejects only when `signal` aborts. */
  async function download(attachment: Attachment, signal: AbortSignal): Promise<DownloadResult> {
    if (attachment.declaredSize !== undefined && attachment.declaredSize > maxFileBytes) {
      return { note: tooBigNote(attachment, attachment.declaredSize) };
    }
    try {
      const file = await options.getFile(attachment.fileId, signal);
      if (file.file_size !== undefined && file.file_size > maxFileBytes) return { note: tooBigNote(attachment, file.file_size) };
      if (!file.file_path) throw new Error("getFile returned no file_path");
      await mkdir(options.downloadDir, { recursive: true });
      const base = safeAttachmentName(attachment.uniqueId);
      const fileName = attachment.name ? `${base}-${safeAttachmentName(attachment.name)}` : `${base}${extensionOf(file.file_path, attachment.kind)}`;
      const path = join(options.downloadDir, fileName);
      await save(options.fileUrl(file.file_path), path, signal);
      const media: Media = { path, kind: attachment.kind };
      if (attachment.mimeType) media.mimeType = attachment.mimeType;
      if (attachment.name) media.name = attachment.name;
      if (attachment.durationSeconds !== undefined) media.durationSeconds = attachment.durationSeconds;
      return { media };
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof TooBigError) return { note: tooBigNote(attachment, error.bytes) };
      // getFile itself refuses files over 20 MB on the public Bot API.
      if (/file is too big/i.test(String((error as Error).message))) return { note: tooBigNote(attachment, attachment.declaredSize) };
      logger.warn({ channel: "telegram", fileUniqueId: attachment.uniqueId, error: options.scrub(String((error as Error).message ?? error)) }, "telegram file download failed");
      return { note: `[${attachment.label} could not be downloaded]` };
    }
  }

  return { download };
}

export type FileDownloader = ReturnType<typeof createFileDownloader>;
