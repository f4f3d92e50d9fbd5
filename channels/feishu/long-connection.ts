/**
 * The long connection: the SDK's WSClient (it asks `POST /callback/ws/endpoint` for a URL and a
 * ClientConfig, dials it, pings every PingInterval and answers each event frame with the handler's
 * result), plus what it lacks:
 *
 * - A watchdog. Every frame that arrives (a pong to our ping, an event) proves the connection
 *   alive; a connection that has been silent for `silenceTimeoutMs` (default three ping intervals,
 *   at least one and a half) is thrown away and a new client dials again. Reconnects are logged
 *   and counted, the SDK's own (after a close) as well as the watchdog's.
 * - A start that fails loudly: WSClient.start() silently does nothing unless the app id looks like
 *   `cli_` + 16 hex characters, and reports a refused endpoint only through `onError`.
 *
 * Feishu delivers each event to ONE of the clients connected for an app. With several gateways the
 * leader lease (channel-runtime) keeps exactly one connected; were two connected anyway, each event
 * still reaches one of them, and the bus's inbound dedupe holds if Feishu redelivers to the other.
 */
import { EventDispatcher, LoggerLevel, WSClient } from "@larksuiteoapi/node-sdk";
import type { Logger } from "pino";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { APP_ID_PATTERN } from "./config.js";
import { MESSAGE_RECEIVED } from "./event-schema.js";
import { feishuScrubber } from "./feishu-errors.js";
import type { Scrub } from "../../src/gateway/kit/index.js";

export interface LongConnectionOptions {
  appId: string;
  appSecret: string;
  domain: string;
  /** Takes one `im.message.receive_v1` event (flattened); its answer is the frame's acknowledgement. */
  onMessage(event: Record<string, unknown>): Promise<void>;
  logger: Logger;
  /** Reconnect after this long without a frame. Default three ping intervals (as Feishu sets them). */
  silenceTimeoutMs?: number;
  /** How long start() waits for the first connection before it goes on in the background. Default 20 s. */
  connectTimeoutMs?: number;
  now?: () => number;
}

export interface LongConnection {
  /** Resolves once connected (or still trying after `connectTimeoutMs`); rejects when Feishu refused. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Reconnects so far (the SDK's and the watchdog's). */
  readonly reconnects: number;
}

/** What the watchdog reads of a WSClient. The SDK keeps the socket private; this is the one place that reaches for it. */
interface ClientInternals {
  wsConfig?: { getWSInstance?(): { on(event: "message", listener: () => void): unknown } | null; getWS?(key: "pingInterval"): unknown };
}

const DEFAULT_PING_INTERVAL_MS = 120_000;

/** The SDK's logger, onto pino: messages only (its objects carry requests), secrets scrubbed. */
export function sdkLogger(logger: Logger, scrub: Scrub) {
  const text = (parts: unknown[]) =>
    scrub(
      parts
        .flat()
        .map((part) => (typeof part === "string" ? part : part instanceof Error ? part.message : ""))
        .filter((part) => part.length > 0)
        .join(" "),
    );
  // Its errors are logged as warnings: the adapter reports what failed as a ChannelError anyway.
  const to = (level: "warn" | "debug" | "trace") => (...parts: unknown[]) => {
    const message = text(parts);
    if (message.length > 0) logger[level]({ channel: "feishu", sdk: true }, message);
  };
  return { error: to("warn"), warn: to("warn"), info: to("debug"), debug: to("trace"), trace: to("trace") };
}

export function createLongConnection(options: LongConnectionOptions): LongConnection {
  return new FeishuLongConnection(options);
}

/** One long connection: the current WSClient (a generation number tells its callbacks from a discarded one's) and the watchdog. */
class FeishuLongConnection implements LongConnection {
  private readonly now: () => number;
  private readonly scrub: Scrub;
  private readonly log: Logger;
  private client: WSClient | undefined;
  private generation = 0;
  private lastFrameAt: number;
  private connected = false;
  private reconnectCount = 0;
  private watchdog: NodeJS.Timeout | undefined;
  private running = false;

  constructor(private readonly options: LongConnectionOptions) {
    this.now = options.now ?? Date.now;
    this.scrub = feishuScrubber([options.appSecret]);
    this.log = options.logger.child({ channel: "feishu", mode: "longConnection" });
    this.lastFrameAt = this.now();
  }

  get reconnects(): number {
    return this.reconnectCount;
  }

  async start(): Promise<void> {
    if (!APP_ID_PATTERN.test(this.options.appId)) {
      // WSClient.start() would log and return without ever connecting.
      throw new ChannelError("the Feishu long connection needs an app id of the form cli_ + 16 hex characters", "feishu");
    }
    this.running = true;
    this.lastFrameAt = this.now();
    const interval = Math.max(200, Math.min(5_000, Math.floor((this.options.silenceTimeoutMs ?? DEFAULT_PING_INTERVAL_MS) / 4)));
    this.watchdog = setInterval(() => this.check(), interval);
    this.watchdog.unref();
    const first = this.connect();
    const timeoutMs = this.options.connectTimeoutMs ?? 20_000;
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), timeoutMs);
    });
    try {
      const outcome = await Promise.race([first, waited]);
      if (outcome === "timeout") this.log.warn({ timeoutMs }, "feishu long connection not open yet; still trying in the background");
    } catch (error) {
      this.running = false;
      clearInterval(this.watchdog);
      this.discard();
      throw error;
    } finally {
      clearTimeout(timer);
    }
    first.catch(() => undefined);
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = undefined;
    this.discard();
  }

  /**
   * Three ping intervals by default. A configured limit counts for at least one and a half: a
   * healthy connection is silent for a whole interval between two pongs, and a shorter limit threw
   * it away before every pong (a reconnect a second with pings a second apart and a limit of 800 ms).
   */
  private silenceLimitMs(target: WSClient): number {
    const reported = Number(internals(target).wsConfig?.getWS?.("pingInterval"));
    const interval = Number.isFinite(reported) && reported > 0 ? reported : undefined;
    const configured = this.options.silenceTimeoutMs;
    if (configured === undefined) return 3 * (interval ?? DEFAULT_PING_INTERVAL_MS);
    return interval === undefined ? configured : Math.max(configured, 1.5 * interval);
  }

  /** Listens to the socket the client just opened: any frame is proof of life. */
  private watchSocket(target: WSClient): void {
    this.lastFrameAt = this.now();
    this.connected = true;
    const socket = internals(target).wsConfig?.getWSInstance?.();
    if (!socket) {
      this.log.warn("cannot watch the long connection's frames; the watchdog counts from the last connect");
      return;
    }
    socket.on("message", () => {
      if (this.client === target) this.lastFrameAt = this.now();
    });
  }

  /** Dials a new client; resolves when it is open, rejects when Feishu refused. Callbacks of an older generation are ignored. */
  private connect(): Promise<void> {
    const { options, log, scrub } = this;
    const mine = ++this.generation;
    const current = () => mine === this.generation;
    const dispatcher = new EventDispatcher({ logger: sdkLogger(options.logger, scrub), loggerLevel: LoggerLevel.warn }).register({
      [MESSAGE_RECEIVED]: async (data: Record<string, unknown>) => {
        await options.onMessage(data);
      },
    });
    return new Promise<void>((resolve, reject) => {
      const target = new WSClient({
        appId: options.appId,
        appSecret: options.appSecret,
        domain: options.domain,
        logger: sdkLogger(options.logger, scrub),
        loggerLevel: LoggerLevel.info,
        autoReconnect: true,
        onReady: () => {
          if (!current()) return;
          this.watchSocket(target);
          log.info("feishu long connection open");
          resolve();
        },
        onReconnecting: () => {
          if (!current()) return;
          this.connected = false;
          this.reconnectCount += 1;
          log.warn({ reconnects: this.reconnectCount }, "feishu long connection closed; the SDK is reconnecting");
        },
        onReconnected: () => {
          if (!current()) return;
          this.watchSocket(target);
          log.info({ reconnects: this.reconnectCount }, "feishu long connection reconnected");
        },
        onError: (error) => {
          if (!current()) return;
          this.connected = false;
          const failure = new ChannelError(scrub(`feishu long connection failed: ${errorMessage(error)}`), "feishu");
          log.error({ error: failure.message }, "feishu long connection gave up");
          reject(failure);
        },
      });
      this.client = target;
      void target.start({ eventDispatcher: dispatcher }).catch((error: unknown) => reject(new ChannelError(scrub(`feishu long connection failed: ${errorMessage(error)}`), "feishu")));
    });
  }

  private discard(): void {
    this.generation += 1;
    this.connected = false;
    try {
      this.client?.close({ force: true });
    } catch (error) {
      this.log.debug({ error: errorMessage(error) }, "closing the old long connection failed");
    }
    this.client = undefined;
  }

  /** The watchdog's tick: a connection silent past its limit is thrown away and dialled again. */
  private check(): void {
    if (!this.running || !this.client) return;
    const silentFor = this.now() - this.lastFrameAt;
    if (silentFor < this.silenceLimitMs(this.client)) return;
    this.reconnectCount += 1;
    this.log.warn({ silentMs: silentFor, reconnects: this.reconnectCount, wasConnected: this.connected }, "feishu long connection silent; reconnecting");
    this.discard();
    this.lastFrameAt = this.now();
    this.connect().catch((error: unknown) => this.log.error({ error: errorMessage(error) }, "feishu long connection could not reconnect"));
  }
}

function internals(target: WSClient): ClientInternals {
  return target as unknown as ClientInternals;
}
