/**
 * Downloads an image, file or voice message of an inbound message through the message-resource API
 * (`GET /open-apis/im/v1/messages/:message_id/resources/:file_key?type=image|file`, a voice message
 * being a `file`) into the
 * download directory, with a size cap on the bytes that actually arrive. A resource over the cap,
 * or one that fails to download, becomes a note for the text instead: the message still reaches
 * the model, and nothing here throws except an abort.
 */
import { mkdir } from "node:fs/promises";
import { extname, join } from "node:path";
import type { Readable } from "node:stream";
import type { Logger } from "pino";
import type { Media } from "../../src/bus/message.js";
import { errorMessage } from "../../src/errors.js";
import { TooBigError, formatBytes, safeAttachmentName, saveDownload } from "../../src/gateway/kit/index.js";

export interface Resource {
  messageId: string;
  fileKey: string;
  type: "image" | "file";
  /** The sender's file name (files). */
  name?: string;
  /** How a note calls it: `image`, `file "report.pdf"`. */
  label: string;
  /** A voice message (a `file` to the API): kept as audio, for the gateway to transcribe. */
  audio?: { durationSeconds?: number };
}

export type DownloadResult = { media: Media } | { note: string };

/** The resource API's answer: the body as a stream and the response headers. */
export interface ResourceStream {
  stream: Readable;
  headers: Record<string, unknown>;
}

export interface ResourceDownloaderOptions {
  fetchResource(resource: Resource): Promise<ResourceStream>;
  downloadDir: string;
  maxImageBytes: number;
  maxFileBytes: number;
  logger: Logger;
}


function header(headers: Record<string, unknown>, name: string): string | undefined {
  const value = headers[name] ?? headers[name.toLowerCase()];
  if (Array.isArray(value)) return typeof value[0] === "string" ? value[0] : undefined;
  return typeof value === "string" || typeof value === "number" ? String(value) : undefined;
}

const imageExtensions: Record<string, string> = { "image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp", "image/bmp": ".bmp" };

/** Feishu records voice as Opus; the resource API often answers with a generic type. */
function audioMedia(path: string, mimeType: string | undefined, durationSeconds: number | undefined): Media {
  const media: Media = { path, kind: "audio", mimeType: mimeType?.startsWith("audio/") ? mimeType : "audio/opus" };
  if (durationSeconds !== undefined) media.durationSeconds = durationSeconds;
  return media;
}

export function createResourceDownloader(options: ResourceDownloaderOptions) {
  const { logger } = options;

  async function download(resource: Resource, signal: AbortSignal): Promise<DownloadResult> {
    const cap = resource.type === "image" ? options.maxImageBytes : options.maxFileBytes;
    const tooBig = () => ({ note: `[${resource.label} not downloaded: over the ${formatBytes(cap)} limit]` });
    let target: string | undefined;
    try {
      const { stream, headers } = await options.fetchResource(resource);
      const announcedBytes = Number(header(headers, "content-length") ?? Number.NaN);
      if (announcedBytes > cap) {
        stream.destroy();
        return tooBig();
      }
      const mimeType = header(headers, "content-type")?.split(";")[0]?.trim();
      await mkdir(options.downloadDir, { recursive: true });
      const base = safeAttachmentName(resource.fileKey);
      const extension = resource.name ? "" : resource.type === "image" ? (imageExtensions[mimeType ?? ""] ?? ".img") : resource.audio ? ".opus" : "";
      const fileName = resource.name ? `${base}-${safeAttachmentName(resource.name)}` : `${base}${extension}`;
      target = join(options.downloadDir, fileName);
      await saveDownload(stream, target, { maxBytes: cap, signal });
      if (resource.audio) return { media: audioMedia(target, mimeType, resource.audio.durationSeconds) };
      const kind: Media["kind"] = resource.type === "image" || mimeType?.startsWith("image/") ? "image" : "document";
      const media: Media = { path: target, kind };
      const knownMime = mimeType && mimeType !== "application/octet-stream" ? mimeType : resource.type === "image" ? "image/png" : undefined;
      if (knownMime) media.mimeType = knownMime;
      if (resource.name) media.name = resource.name;
      // A file the extension says is an image is one for the model too.
      if (kind === "document" && /\.(png|jpe?g|gif|webp)$/i.test(extname(resource.name ?? ""))) media.kind = "image";
      return { media };
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof TooBigError) return tooBig();
      logger.warn({ channel: "feishu", messageId: resource.messageId, fileKey: resource.fileKey, error: errorMessage(error) }, "feishu resource download failed");
      return { note: `[${resource.label} could not be downloaded]` };
    }
  }

  return { download };
}
