/**
 * Downloads a picture or file of an inbound message: the download code is exchanged for a
 * temporary URL (`POST /v1.0/robot/messageFiles/download` with the robot code), whose bytes are
 * saved under the download directory with a cap on what arrives. A file over its cap, or one that
 * fails to download, becomes a note for the text instead: the message still reaches the model, and
 * nothing here throws except an abort.
 */
import { createHash } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { extname, join } from "node:path";
import type { Logger } from "pino";
import type { Media } from "../../src/bus/message.js";
import { errorMessage } from "../../src/errors.js";
import { TooBigError, formatBytes, safeAttachmentName, saveDownload } from "../../src/gateway/kit/index.js";
import type { DingTalkApi } from "./open-api.js";

export interface Attachment {
  downloadCode: string;
  type: "image" | "file";
  /** The sender's file name (files). */
  name?: string;
  /** How a note calls it: `image`, `file "report.pdf"`. */
  label: string;
}

export type DownloadResult = { media: Media } | { note: string };

export interface FileDownloaderOptions {
  api: DingTalkApi;
  robotCode: string;
  downloadDir: string;
  maxImageBytes: number;
  maxFileBytes: number;
  logger: Logger;
}

const imageExtensions: Record<string, string> = { "image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp", "image/bmp": ".bmp" };

export function createFileDownloader(options: FileDownloaderOptions) {
  const { api, logger } = options;

  async function download(attachment: Attachment, signal: AbortSignal): Promise<DownloadResult> {
    const cap = attachment.type === "image" ? options.maxImageBytes : options.maxFileBytes;
    const tooBig = () => ({ note: `[${attachment.label} not downloaded: over the ${formatBytes(cap)} limit]` });
    try {
      const { downloadUrl } = await api.call<{ downloadUrl?: string }>("messageFiles.download", "POST", "/v1.0/robot/messageFiles/download", {
        downloadCode: attachment.downloadCode,
        robotCode: options.robotCode,
      });
      if (!downloadUrl) throw new Error("no downloadUrl in the answer");
      const response = await api.download(downloadUrl, signal);
      const mimeType = response.headers.get("content-type")?.split(";")[0]?.trim();
      await mkdir(options.downloadDir, { recursive: true });
      // Download codes are long and opaque: a hash of one names the file.
      const base = createHash("sha256").update(attachment.downloadCode).digest("hex").slice(0, 24);
      const extension = attachment.name ? "" : attachment.type === "image" ? (imageExtensions[mimeType ?? ""] ?? ".img") : "";
      const target = join(options.downloadDir, attachment.name ? `${base}-${safeAttachmentName(attachment.name)}` : `${base}${extension}`);
      const announced = Number(response.headers.get("content-length") ?? Number.NaN);
      if (!response.body) throw new Error("the download has no body");
      await saveDownload(response.body, target, { maxBytes: cap, signal, ...(Number.isFinite(announced) ? { announcedBytes: announced } : {}) });
      const isImage = attachment.type === "image" || mimeType?.startsWith("image/") === true || /\.(png|jpe?g|gif|webp)$/i.test(extname(attachment.name ?? ""));
      const media: Media = { path: target, kind: isImage ? "image" : "document" };
      const knownMime = mimeType && mimeType !== "application/octet-stream" ? mimeType : attachment.type === "image" ? "image/png" : undefined;
      if (knownMime) media.mimeType = knownMime;
      if (attachment.name) media.name = attachment.name;
      return { media };
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof TooBigError) return tooBig();
      logger.warn({ channel: "dingtalk", label: attachment.label, error: errorMessage(error) }, "dingtalk file download failed");
      return { note: `[${attachment.label} could not be downloaded]` };
    }
  }

  return { download };
}
