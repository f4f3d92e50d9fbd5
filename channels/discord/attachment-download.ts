/**
 * Attachments of an inbound Discord message: images and voice messages (or other audio) up to the
 * size cap are downloaded from the CDN into the download directory and become image or audio media
 * (audio with its duration, for the gateway to transcribe); anything else (other files, attachments
 * over the cap, a failed download) is named in a note for the text, so the model knows it is
 * there. Nothing here throws except an abort (the adapter stops).
 *
 * Only URLs on Discord's CDN hosts (and the configured API root's host, for proxies and tests) are
 * fetched, without following redirects: an attachment URL is data from the platform, not a place
 * the gateway should be sent anywhere.
 */
import { mkdir } from "node:fs/promises";
import { extname, join } from "node:path";
import type { Logger } from "pino";
import type { Media } from "../../src/bus/message.js";
import { TooBigError, formatBytes, safeAttachmentName, saveDownload } from "../../src/gateway/kit/index.js";

export interface InboundAttachment {
  id: string;
  name: string;
  /** Bytes, as the message announced. */
  size: number;
  url: string;
  contentType?: string;
  /** The message is a voice message (flag IS_VOICE_MESSAGE): its one attachment is the recording. */
  voice?: boolean;
  /** How long the recording plays, in seconds (`duration_secs`, voice messages). */
  durationSeconds?: number;
}

export interface AttachmentDownloaderOptions {
  downloadDir: string;
  maxImageBytes: number;
  /** Hosts attachment URLs may point at. */
  allowedHosts: readonly string[];
  fetch: typeof globalThis.fetch;
  logger: Logger;
}

export const DISCORD_CDN_HOSTS = ["cdn.discordapp.com", "media.discordapp.net"] as const;

const imageExtensions = new Set([".png", ".jpg", ".jpeg", ".gif", ".webp"]);


const audioExtensions = new Set([".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".webm", ".flac"]);

/** What the attachment becomes: image or audio media, or only a note. */
function kindOf(attachment: InboundAttachment): "image" | "audio" | undefined {
  if (attachment.voice) return "audio";
  const extension = extname(attachment.name).toLowerCase();
  if (attachment.contentType?.startsWith("image/") || (!attachment.contentType && imageExtensions.has(extension))) return "image";
  if (attachment.contentType?.startsWith("audio/") || (!attachment.contentType && audioExtensions.has(extension))) return "audio";
  return undefined;
}

export function createAttachmentDownloader(options: AttachmentDownloaderOptions) {
  const { maxImageBytes, logger } = options;
  const allowedHosts = new Set(options.allowedHosts.map((host) => host.toLowerCase()));

  async function save(url: URL, target: string, signal: AbortSignal): Promise<void> {
    const response = await options.fetch(url, { signal, redirect: "error" });
    if (!response.ok || !response.body) {
      await response.body?.cancel();
      throw new Error(`attachment download answered ${response.status}`);
    }
    const announcedBytes = Number(response.headers.get("content-length") ?? Number.NaN);
    await saveDownload(response.body, target, { maxBytes: maxImageBytes, announcedBytes, signal });
  }

  async function download(attachment: InboundAttachment, kind: "image" | "audio", signal: AbortSignal): Promise<{ media: Media } | { note: string }> {
    const label = attachment.voice ? "voice message" : `${kind === "image" ? "image" : "audio file"} "${attachment.name}"`;
    const tooBig = (bytes: number | undefined) => ({ note: `[${label} not downloaded: ${bytes === undefined ? "it is" : `${formatBytes(bytes)} is`} over the ${formatBytes(maxImageBytes)} limit]` });
    if (attachment.size > maxImageBytes) return tooBig(attachment.size);
    let url: URL;
    try {
      url = new URL(attachment.url);
    } catch {
      return { note: `[${label} could not be downloaded]` };
    }
    if (!allowedHosts.has(url.hostname.toLowerCase()) || !/^https?:$/.test(url.protocol)) {
      logger.warn({ channel: "discord", attachmentId: attachment.id, host: url.hostname }, "discord attachment URL is not on Discord's CDN; not downloaded");
      return { note: `[${label} could not be downloaded]` };
    }
    try {
      await mkdir(options.downloadDir, { recursive: true });
      // The attachment id names the file: a redelivered message rewrites the same one.
      const path = join(options.downloadDir, `${safeAttachmentName(attachment.id)}-${safeAttachmentName(attachment.name)}`);
      await save(url, path, signal);
      const media: Media = { path, kind, name: attachment.name };
      if (attachment.contentType) media.mimeType = attachment.contentType;
      else if (attachment.voice) media.mimeType = "audio/ogg";
      if (attachment.durationSeconds !== undefined) media.durationSeconds = attachment.durationSeconds;
      return { media };
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof TooBigError) return tooBig(undefined);
      logger.warn({ channel: "discord", attachmentId: attachment.id, error: (error as Error).message }, "discord attachment download failed");
      return { note: `[${label} could not be downloaded]` };
    }
  }

  /** The media and notes of a message's attachments, in their order. Rejects only when `signal` aborts. */
  async function collect(attachments: readonly InboundAttachment[], signal: AbortSignal): Promise<{ media: Media[]; notes: string[] }> {
    const media: Media[] = [];
    const notes: string[] = [];
    for (const attachment of attachments) {
      const kind = kindOf(attachment);
      if (!kind) {
        const type = attachment.contentType ? `${attachment.contentType}, ` : "";
        notes.push(`[file "${attachment.name}" attached (${type}${formatBytes(attachment.size)}): not downloaded]`);
        continue;
      }
      const result = await download(attachment, kind, signal);
      if ("media" in result) media.push(result.media);
      else notes.push(result.note);
    }
    return { media, notes };
  }

  return { collect };
}

export type AttachmentDownloader = ReturnType<typeof createAttachmentDownloader>;
