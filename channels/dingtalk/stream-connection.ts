/**
 * The Stream mode long connection, through the official SDK (`dingtalk-stream`'s DWClient): it
 * opens the WebSocket at the endpoint DingTalk names, answers the server's `ping` frames, pings
 * every 8 s and drops a socket whose pong does not come (keepAlive), and hands each CALLBACK frame
 * of the robot topic on. What the SDK lacks is added in a subclass, each in one method:
 *
 * - the endpoint: the SDK posts to a hard-coded `https://api.dingtalk.com/v1.0/gateway/connections/open`;
 *   {@link getEndpoint} posts to `<apiRoot>/v1.0/gateway/connections/open` (a proxy, a test server)
 *   and says why DingTalk refused (the SDK swallows it and retries every second for ever);
 * - reconnecting with back-off (the SDK's fixed 1 s), one attempt at a time whoever asks for one
 *   (the SDK after a close, a failed attempt), and never after stop();
 * - the heartbeat timer of a closed socket is cleared before the next one starts (the SDK leaks one
 *   per reconnect, and two timers end a healthy socket);
 * - `disconnect` (DingTalk is about to close the socket) closes it at once to reconnect;
 * - a frame that is not JSON is logged, not thrown out of the socket's event handler.
 *
 * Acknowledgements: a robot message is acknowledged (`socketCallBackResponse`) only once the
 * adapter took it; one that is not gets redelivered by DingTalk, and dedupes on its msgId.
 * DingTalk delivers each message to ONE of an app's connections; the leader lease keeps one.
 */
import { DWClient, type DWClientConfig, type DWClientDownStream } from "dingtalk-stream";
import type { Logger } from "pino";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { type Scrub, backoffDelay } from "../../src/gateway/kit/index.js";
import { failureOf, toChannelError } from "./dingtalk-errors.js";
import { ROBOT_TOPIC } from "./robot-message.js";

export interface StreamConnectionOptions {
  apiRoot: string;
  appKey: string;
  appSecret: string;
  /** Takes one robot message (the frame's `data`); resolves once it may be acknowledged, rejects when it may not. */
  onMessage(data: string): Promise<void>;
  scrub: Scrub;
  logger: Logger;
  /** Told once when an open connection drops, and once when one is open again. */
  onConnection?(change: { connected: boolean; reason?: string }): void;
  /** How long start() waits for the socket to open. Default 20 s. */
  connectTimeoutMs?: number;
}

export interface StreamConnection {
  /** Resolves once the socket is open; rejects when DingTalk refused the app (bad credentials, no Stream mode). */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Connections opened after the first. */
  readonly reconnects: number;
}

const SOCKET_CONNECTING = 0;
const SOCKET_OPEN = 1;

/** The SDK fields the subclass reaches for: private in its typings, plain fields at run time. */
interface ClientInternals {
  dw_url?: string;
  socket?: { close(): void; readyState: number };
  heartbeatIntervallId?: NodeJS.Timeout;
}

class CountBotStreamClient extends DWClient {
  stopped = false;
  opened = 0;
  private failures = 0;
  private attempting = false;
  private down = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly settings: StreamConnectionOptions,
    private readonly log: Logger,
  ) {
    // Subscriptions of our own: the SDK's default array is shared by every client of the process.
    const config: ConstructorParameters<typeof DWClient>[0] & Partial<DWClientConfig> = {
      clientId: settings.appKey,
      clientSecret: settings.appSecret,
      keepAlive: true,
      autoReconnect: true,
      ua: "countbot",
      subscriptions: [{ type: "CALLBACK", topic: ROBOT_TOPIC }],
    };
    super(config);
  }

  private get internals(): ClientInternals {
    return this as unknown as ClientInternals;
  }

  override async getEndpoint(): Promise<this> {
    const url = `${this.settings.apiRoot.replace(/\/+$/, "")}/v1.0/gateway/connections/open`;
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ clientId: this.config.clientId, clientSecret: this.config.clientSecret, ua: this.config.ua, subscriptions: this.config.subscriptions }),
        signal: AbortSignal.timeout(15_000),
      });
      const text = await response.text();
      const body = text.trim() === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
      const failure = failureOf(response.status, body);
      if (failure) throw failure;
      const { endpoint, ticket } = body as { endpoint?: unknown; ticket?: unknown };
      if (typeof endpoint !== "string" || typeof ticket !== "string") throw new ChannelError("dingtalk gateway answered without an endpoint and ticket", "dingtalk");
      this.internals.dw_url = `${endpoint}?ticket=${encodeURIComponent(ticket)}`;
      return this;
    } catch (error) {
      throw toChannelError(error, "gateway.connections.open", this.settings.scrub);
    }
  }

  override _connect(): Promise<void> {
    clearInterval(this.internals.heartbeatIntervallId);
    return super._connect().then(() => {
      this.opened += 1;
      this.failures = 0;
      if (this.down) this.settings.onConnection?.({ connected: true });
      this.down = false;
      if (this.opened > 1) this.log.info({ reconnects: this.opened - 1 }, "dingtalk stream reconnected");
    });
  }

  /** Called by the SDK a second after a socket closed: one reconnect is scheduled at a time, with back-off. */
  override async connect(): Promise<void> {
    if (!this.stopped && !this.down) {
      this.down = true;
      this.settings.onConnection?.({ connected: false, reason: "the Stream socket closed" });
    }
    this.reconnectSoon();
  }

  private reconnectSoon(): void {
    if (this.stopped || this.timer) return;
    const delayMs = this.failures === 0 ? 0 : backoffDelay(this.failures, 1_000, 60_000);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.attempt();
    }, delayMs);
    this.timer.unref();
  }

  private async attempt(): Promise<void> {
    const state = this.internals.socket?.readyState;
    if (this.stopped || this.attempting || state === SOCKET_CONNECTING || state === SOCKET_OPEN) return;
    this.attempting = true;
    try {
      await this.getEndpoint();
      if (!this.stopped) await this._connect();
    } catch (error) {
      this.failures += 1;
      if (!this.stopped) this.log.warn({ error: errorMessage(error), failures: this.failures }, "dingtalk stream connection failed; trying again");
    } finally {
      this.attempting = false;
    }
    if (this.failures > 0) this.reconnectSoon();
  }

  override onDownStream(data: string): void {
    try {
      super.onDownStream(data);
    } catch (error) {
      this.log.warn({ error: errorMessage(error) }, "dingtalk stream frame not understood; skipped");
    }
  }

  override onSystem(downstream: DWClientDownStream): void {
    super.onSystem(downstream);
    if (downstream.headers.topic === "disconnect") {
      this.log.info("dingtalk asked the stream connection to go; reconnecting");
      this.internals.socket?.close();
    }
  }

  close(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.internals.heartbeatIntervallId);
    if (this.internals.socket) this.disconnect();
  }
}

export function createStreamConnection(options: StreamConnectionOptions): StreamConnection {
  const log = options.logger.child({ channel: "dingtalk", mode: "stream" });
  let client: CountBotStreamClient | undefined;

  function listen(target: CountBotStreamClient): void {
    target.registerCallbackListener(ROBOT_TOPIC, (frame: DWClientDownStream) => {
      const messageId = frame.headers.messageId;
      options.onMessage(frame.data).then(
        () => {
          if (!target.stopped) target.socketCallBackResponse(messageId, { status: "SUCCESS" });
        },
        (error: unknown) => log.warn({ frameId: messageId, error: errorMessage(error) }, "dingtalk message not taken; left for DingTalk to deliver again"),
      );
    });
  }

  return {
    get reconnects() {
      return Math.max(0, (client?.opened ?? 0) - 1);
    },
    async start() {
      const target = new CountBotStreamClient(options, log);
      client = target;
      listen(target);
      let timer: NodeJS.Timeout | undefined;
      const timeoutMs = options.connectTimeoutMs ?? 20_000;
      try {
        // The first connection is made here, so that a refusal fails the start instead of retrying in silence.
        await target.getEndpoint();
        await Promise.race([
          target._connect(),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new ChannelError(`dingtalk stream socket not open after ${timeoutMs} ms`, "dingtalk", { kind: "network" })), timeoutMs);
          }),
        ]);
      } catch (error) {
        target.close();
        throw toChannelError(error, "stream connect", options.scrub);
      } finally {
        clearTimeout(timer);
      }
      log.info("dingtalk stream connection open");
    },
    async stop() {
      client?.close();
      client = undefined;
    },
  };
}
