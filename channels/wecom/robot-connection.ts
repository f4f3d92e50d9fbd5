/**
 * The intelligent robot's long connection, through WeCom's own SDK (`@wecom/aibot-node-sdk`'s
 * WSClient): it opens the WebSocket, authenticates with the bot id and secret
 * (`aibot_subscribe`), keeps it alive with `ping` frames, reconnects with back-off, hands each
 * `aibot_msg_callback` frame on, and sends replies (`aibot_respond_msg`, one at a time per
 * message, each waiting for WeCom's acknowledgement) and pushes (`aibot_send_msg`).
 *
 * start() resolves once WeCom accepted the credentials, and rejects when it refused them. The SDK
 * logs through pino here; at debug level it logs frames, never the secret.
 */
import { type SendMsgBody, WSClient, type WsFrame } from "@wecom/aibot-node-sdk";
import type { Logger } from "pino";
import { ChannelError } from "../../src/errors.js";
import type { Scrub } from "../../src/gateway/kit/index.js";

export interface RobotConnectionOptions {
  botId: string;
  secret: string;
  wsUrl: string;
  logger: Logger;
  scrub: Scrub;
  onFrame(frame: WsFrame): void;
  onConnection?(change: { connected: boolean; reason?: string }): void;
  connectTimeoutMs?: number;
}

export interface RobotConnection {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** A streamed reply to the message of `frame`: the whole text so far; `finish` ends it. */
  replyStream(frame: WsFrame, streamId: string, content: string, finish: boolean): Promise<void>;
  /** A message pushed into a chat (a user id, or a group's chat id). */
  push(chatId: string, body: SendMsgBody): Promise<void>;
}

type SdkLogger = ConstructorParameters<typeof WSClient>[0]["logger"];

export function createRobotConnection(options: RobotConnectionOptions): RobotConnection {
  const log = options.logger.child({ channel: "wecom", mode: "robot" });
  const line = (message: string, args: unknown[]) => options.scrub([message, ...args.map((arg) => (arg instanceof Error ? arg.message : typeof arg === "string" ? arg : JSON.stringify(arg)))].join(" "));
  const sdkLogger: SdkLogger = {
    debug: (message: string, ...args: unknown[]) => log.debug(line(message, args)),
    info: (message: string, ...args: unknown[]) => log.debug(line(message, args)),
    warn: (message: string, ...args: unknown[]) => log.warn(line(message, args)),
    error: (message: string, ...args: unknown[]) => log.warn(line(message, args)),
  };
  let client: WSClient | undefined;
  let up = false;

  function connected(): WSClient {
    if (!client?.isConnected) throw new ChannelError("wecom robot: the long connection is not open", "wecom", { kind: "network" });
    return client;
  }

  return {
    async start() {
      const target = new WSClient({ botId: options.botId, secret: options.secret, wsUrl: options.wsUrl, logger: sdkLogger, maxReconnectAttempts: -1, maxAuthFailureAttempts: 1 });
      client = target;
      target.on("message", (frame: WsFrame) => options.onFrame(frame));
      const timeoutMs = options.connectTimeoutMs ?? 20_000;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new ChannelError(`wecom robot: not authenticated after ${timeoutMs} ms`, "wecom", { kind: "network" })), timeoutMs);
        target.once("authenticated", () => {
          clearTimeout(timer);
          resolve();
        });
        target.once("error", (error: Error) => {
          if (!/Authentication failed/.test(error.message)) return;
          clearTimeout(timer);
          reject(new ChannelError(options.scrub(`wecom robot refused the bot id and secret: ${error.message}`), "wecom", { kind: "auth" }));
        });
        target.connect();
      }).catch((error: unknown) => {
        target.disconnect();
        client = undefined;
        throw error;
      });
      up = true;
      target.on("disconnected", (reason: string) => {
        if (!up || client !== target) return;
        up = false;
        options.onConnection?.({ connected: false, reason: `the long connection closed: ${reason}` });
      });
      target.on("authenticated", () => {
        if (up || client !== target) return;
        up = true;
        options.onConnection?.({ connected: true });
      });
      log.info("wecom robot long connection open");
    },
    async stop() {
      const target = client;
      client = undefined;
      up = false;
      target?.disconnect();
    },
    async replyStream(frame, streamId, content, finish) {
      await connected().replyStream(frame, streamId, content, finish);
    },
    async push(chatId, body) {
      await connected().sendMessage(chatId, body);
    },
  };
}
