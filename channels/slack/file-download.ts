/**
 * Files shared in a Slack message: each is downloaded from its `url_private_download` (or
 * `url_private`) with the bot token (the `files:read` scope), saved under the download directory
 * with a cap on what arrives (images `maxImageBytes`, other files `maxFileBytes`), and becomes
 * media. A file over its cap, one Slack only links to (an external file, a Google Drive link), or
 * one that fails to download becomes a note for the text instead: the message still reaches the
 * model, and nothing here throws except an abort.
 *
 * The bot token is a credential: it is sent only to Slack's file host (`files.slack.com`, and the
 * configured API root's host, for proxies and tests), over http(s), without following redirects.
 */
import { mkdir } from "node:fs/promises";
import { extname, join } from "node:path";
import type { Logger } from "pino";
import type { Media } from "../../src/bus/message.js";
import { errorMessage } from "../../src/errors.js";
import { TooBigError, formatBytes, safeAttachmentName, saveDownload } from "../../src/gateway/kit/index.js";
import type { SlackFile } from "./payloads.js";

export interface FileDownloaderOptions {
  botToken: string;
  downloadDir: string;
  maxImageBytes: number;
  maxFileBytes: number;
  /** Hosts a file URL may point at. */
  allowedHosts: readonly string[];
  logger: Logger;
  timeoutMs?: number;
}

export type DownloadResult = { media: Media } | { note: string };

export const SLACK_FILE_HOSTS = ["files.slack.com"] as const;

const imageExtensions = new Set([".png", ".jpg", ".jpeg", ".gif", ".webp"]);

function isImage(file: SlackFile): boolean {
  if (file.mimetype) return file.mimetype.startsWith("image/");
  return imageExtensions.has(extname(file.name ?? "").toLowerCase());
}

export function createFileDownloader(options: FileDownloaderOptions) {
  const { logger } = options;
  const allowedHosts = new Set(options.allowedHosts.map((host) => host.toLowerCase()));
  const timeoutMs = options.timeoutMs ?? 60_000;

  function urlOf(file: SlackFile): URL | undefined {
    const raw = file.url_private_download ?? file.url_private;
    if (!raw || file.mode === "external" || file.mode === "tombstone") return undefined;
    try {
      const url = new URL(raw);
      if (/^https?:$/.test(url.protocol) && allowedHosts.has(url.hostname.toLowerCase())) return url;
      logger.warn({ channel: "slack", fileId: file.id, host: url.hostname }, "slack file URL is not on Slack's file host; not downloaded");
    } catch {
      // not a URL: noted below
    }
    return undefined;
  }

  /** Downloads one file; resolves with its media or a note. Rejects only when `signal` aborts. */
  async function download(file: SlackFile, signal: AbortSignal): Promise<DownloadResult> {
    const name = file.name ?? file.title ?? file.id;
    const image = isImage(file);
    const cap = image ? options.maxImageBytes : options.maxFileBytes;
    const label = `${image ? "image" : "file"} "${name}"`;
    const tooBig = (bytes?: number) => ({ note: `[${label} not downloaded: ${bytes === undefined ? "it is" : `${formatBytes(bytes)} is`} over the ${formatBytes(cap)} limit]` });
    if (file.size !== undefined && file.size > cap) return tooBig(file.size);
    const url = urlOf(file);
    if (!url) return { note: `[${label} could not be downloaded]` };
    try {
      const response = await fetch(url, {
        headers: { authorization: `Bearer ${options.botToken}` },
        redirect: "error",
        signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
      });
      if (!response.ok || !response.body) {
        await response.body?.cancel();
        throw new Error(`the download answered ${response.status}`);
      }
      // A sign-in page instead of the file: the token lacks files:read.
      const contentType = response.headers.get("content-type")?.split(";")[0]?.trim();
      if (contentType === "text/html" && file.mimetype !== "text/html") {
        await response.body.cancel();
        throw new Error("Slack answered with a web page: the bot token needs the files:read scope");
      }
      await mkdir(options.downloadDir, { recursive: true });
      // The file id names it: a redelivered message rewrites the same file.
      const target = join(options.downloadDir, `${safeAttachmentName(file.id)}-${safeAttachmentName(name)}`);
      const announced = Number(response.headers.get("content-length") ?? Number.NaN);
      await saveDownload(response.body, target, { maxBytes: cap, signal, ...(Number.isFinite(announced) ? { announcedBytes: announced } : {}) });
      const media: Media = { path: target, kind: image ? "image" : "document", name };
      const mimeType = file.mimetype ?? contentType;
      if (mimeType && mimeType !== "application/octet-stream") media.mimeType = mimeType;
      return { media };
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof TooBigError) return tooBig(error.bytes);
      logger.warn({ channel: "slack", fileId: file.id, error: errorMessage(error).replaceAll(options.botToken, "[token]") }, "slack file download failed");
      return { note: `[${label} could not be downloaded]` };
    }
  }

  return { download };
}

export type FileDownloader = ReturnType<typeof createFileDownloader>;
