/**
 * Downloads what a user sent (an image, a voice note, a video, a file) by its MediaId through
 * `GET /cgi-bin/media/get`, saved under the download directory with a cap on what arrives. A file
 * over its cap, or one that fails to download, becomes a note for the text instead: the message
 * still reaches the model, and nothing here throws except an abort.
 */
import { createHash } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import type { Media } from "../../src/bus/message.js";
import { errorMessage } from "../../src/errors.js";
import { TooBigError, formatBytes, safeAttachmentName, saveDownload } from "../../src/gateway/kit/index.js";
import type { WeComApi } from "./wecom-api.js";

export interface Attachment {
  mediaId: string;
  type: "image" | "voice" | "video" | "file";
  /** The sender's file name (files). */
  name?: string;
  /** How a note calls it: `image`, `file "report.pdf"`. */
  label: string;
}

export type DownloadResult = { media: Media } | { note: string };

export interface MediaDownloaderOptions {
  api: WeComApi;
  downloadDir: string;
  maxImageBytes: number;
  maxFileBytes: number;
  logger: Logger;
}

const extensions: Record<string, string> = {
  "image/png": ".png",
  "image/jpeg": ".jpg",
  "image/gif": ".gif",
  "image/webp": ".webp",
  "audio/amr": ".amr",
  "voice/amr": ".amr",
  "video/mp4": ".mp4",
};

/** The file name a Content-Disposition gives (`filename="x.jpg"`, `filename*=UTF-8''x.jpg`). */
function dispositionName(header: string | null): string | undefined {
  if (!header) return undefined;
  const encoded = /filename\*=UTF-8''([^;]+)/i.exec(header)?.[1];
  if (encoded) {
    try {
      return decodeURIComponent(encoded);
    } catch {
      return undefined;
    }
  }
  return /filename="?([^";]+)"?/i.exec(header)?.[1];
}

export function createMediaDownloader(options: MediaDownloaderOptions) {
  const { api, logger } = options;

  async function download(attachment: Attachment, signal: AbortSignal): Promise<DownloadResult> {
    const cap = attachment.type === "image" ? options.maxImageBytes : options.maxFileBytes;
    try {
      const response = await api.media(attachment.mediaId, signal);
      const mimeType = response.headers.get("content-type")?.split(";")[0]?.trim();
      const name = attachment.name ?? dispositionName(response.headers.get("content-disposition"));
      await mkdir(options.downloadDir, { recursive: true });
      // Media ids are long and opaque: a hash of one names the file.
      const base = createHash("sha256").update(attachment.mediaId).digest("hex").slice(0, 24);
      const target = join(options.downloadDir, name ? `${base}-${safeAttachmentName(name)}` : `${base}${extensions[mimeType ?? ""] ?? ""}`);
      const announced = Number(response.headers.get("content-length") ?? Number.NaN);
      if (!response.body) throw new Error("the download has no body");
      await saveDownload(response.body, target, { maxBytes: cap, signal, ...(Number.isFinite(announced) ? { announcedBytes: announced } : {}) });
      const isImage = attachment.type === "image" || mimeType?.startsWith("image/") === true;
      const kind = isImage ? "image" : attachment.type === "voice" ? "audio" : attachment.type === "video" ? "video" : "document";
      const media: Media = { path: target, kind };
      if (mimeType && mimeType !== "application/octet-stream") media.mimeType = mimeType;
      else if (isImage) media.mimeType = "image/jpeg";
      if (name) media.name = name;
      return { media };
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof TooBigError) return { note: `[${attachment.label} not downloaded: over the ${formatBytes(cap)} limit]` };
      logger.warn({ channel: "wecom", label: attachment.label, error: errorMessage(error) }, "wecom media download failed");
      return { note: `[${attachment.label} could not be downloaded]` };
    }
  }

  return { download };
}
