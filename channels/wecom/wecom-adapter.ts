/**
 * The WeCom channel: a ChannelAdapter for a self-built application (自建应用).
 *
 * - Inbound: the application callback (callback-handler.ts): verified, decrypted, answered at once,
 *   then handed to the inbound queue (inbound.ts) that dedupes on the MsgId and keeps each chat in
 *   order; media fetched by MediaId with caps (media-download.ts).
 * - Outbound: `POST /cgi-bin/message/send` to the member (`touser`, the application's `agentid`),
 *   `markdown` or, for the plain fallback, `text`; a chat id `appchat:<chatid>` (a group chat the
 *   application created) goes through `/cgi-bin/appchat/send`. WeCom messages cannot be edited
 *   and applications show no typing: the final reply is sent once (`streaming: "none"`).
 * - The access token: one for every gateway (shared-token.ts).
 * - Errors: ChannelError kinds with no credential in their text (wecom-errors.ts).
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { ChannelError } from "../../src/errors.js";
import type { ChannelAdapter, ChannelCapabilities } from "../../src/gateway/kit/index.js";
import { type CallbackHandler, createCallbackHandler } from "./callback-handler.js";
import { createInbound } from "./inbound.js";
import { createMediaDownloader } from "./media-download.js";
import { MAX_MESSAGE_BYTES, MIN_SEND_INTERVAL_MS } from "./quotas.js";
import { renderWeComMarkdown, wecomRenderedBytes } from "./render-markdown.js";
import type { SharedToken } from "./shared-token.js";
import { createWeComApi } from "./wecom-api.js";
import type { WeComScrubber } from "./wecom-errors.js";

export interface WeComAdapterOptions {
  corpId: string;
  agentId: string;
  /** The callback's Token and EncodingAESKey: secrets, never logged. */
  token: string;
  encryptKey: string;
  apiRoot: string;
  /** The access token, shared by every gateway. */
  accessToken: SharedToken;
  scrubber: WeComScrubber;
  maxImageBytes: number;
  maxFileBytes: number;
  downloadDir: string;
  logger: Logger;
  now?: () => number;
  /** Messages older than this are dropped, not answered. Default 12 h (the bus's dedupe holds for 24 h). */
  maxEventAgeMs?: number;
}

export interface WeComAdapter extends ChannelAdapter {
  /** The callback, GET (URL verification) and POST (messages); 503 for messages until start() and after stop(). */
  readonly callback: CallbackHandler;
}

interface SendAnswer {
  msgid?: string;
  invaliduser?: string;
}

const APPCHAT = "appchat:";
const HOUR_MS = 60 * 60_000;

export function createWeComAdapter(options: WeComAdapterOptions): WeComAdapter {
  const { corpId, agentId, logger } = options;
  const now = options.now ?? Date.now;
  const api = createWeComApi({ apiRoot: options.apiRoot, scrubber: options.scrubber, token: options.accessToken });
  const downloader = createMediaDownloader({ api, downloadDir: options.downloadDir, maxImageBytes: options.maxImageBytes, maxFileBytes: options.maxFileBytes, logger });
  const inbound = createInbound({ download: downloader.download, logger, now, maxEventAgeMs: options.maxEventAgeMs ?? 12 * HOUR_MS });
  const capabilities: ChannelCapabilities = { maxMessageLength: MAX_MESSAGE_BYTES, streaming: "none", draftIntervalMs: 1_000, minSendIntervalMs: MIN_SEND_INTERVAL_MS };
  let running = false;

  const callback = createCallbackHandler({ corpId, token: options.token, encryptKey: options.encryptKey, accepting: () => running, handle: inbound.receive, logger, now });

  async function post(chatId: string, text: string, format: "formatted" | "plain", key: string | undefined): Promise<string> {
    const content = format === "plain" ? { msgtype: "text", text: { content: text } } : { msgtype: "markdown", markdown: { content: text } };
    if (chatId.startsWith(APPCHAT)) {
      await api.call("appchat/send", "/cgi-bin/appchat/send", { chatid: chatId.slice(APPCHAT.length), ...content });
      // appchat/send names no message: an id of our own, stable for the same send.
      return `appchat-${createHash("sha256").update(key ?? `${chatId}:${now()}:${text}`).digest("hex").slice(0, 24)}`;
    }
    const sent = await api.call<SendAnswer>("message/send", "/cgi-bin/message/send", { touser: chatId, agentid: Number(agentId), ...content });
    if (sent.invaliduser && sent.invaliduser.split("|").includes(chatId)) {
      throw new ChannelError("wecom message/send: the member is not in the application's visible range", "wecom", { kind: "not-found" });
    }
    if (!sent.msgid) throw new ChannelError("wecom message/send answered without a msgid", "wecom");
    return sent.msgid;
  }

  return {
    name: "wecom",
    capabilities,
    callback,
    render: renderWeComMarkdown,
    measure: wecomRenderedBytes,

    async probe() {
      await api.accessToken();
      return `application ${agentId} of corp ${corpId}`;
    },

    async start(eventSink) {
      if (running) throw new ChannelError("the WeCom adapter is already running", "wecom");
      // Credentials first: a refused Secret (or an untrusted IP) fails the start.
      await api.accessToken();
      inbound.open(eventSink);
      running = true;
      logger.info({ channel: "wecom", agentId }, "wecom channel started");
    },

    async stop() {
      if (!running) return;
      running = false;
      await inbound.close();
      await options.accessToken.close();
      logger.info({ channel: "wecom" }, "wecom channel stopped");
    },

    async send(chatId, text, sendOptions) {
      return { platformMessageId: await post(chatId, text, sendOptions.format, sendOptions.idempotencyKey) };
    },

    async edit(chatId, platformMessageId) {
      throw new ChannelError(`wecom cannot edit ${platformMessageId} in ${chatId}: application messages are not editable`, "wecom", { kind: "not-found" });
    },

    async typing() {
      // WeCom shows applications no typing indicator.
    },
  };
}
