/**
 * The WebSocket gateway of the QQ Bot API (`websocket` mode), over Node's own WebSocket client:
 *
 * 1. `GET /gateway` names the socket's URL; QQ opens with op 10 Hello and its `heartbeat_interval`;
 * 2. a new session is opened with op 2 Identify (`QQBot <token>`, the intents, shard [0, 1]) and
 *    QQ answers the dispatch READY with its `session_id` and the bot's user; a dropped one is taken
 *    up again with op 6 Resume (`session_id` and the last `s` seen), QQ replays what was missed
 *    and dispatches RESUMED;
 * 3. op 1 Heartbeat (the last `s`) every interval, answered by op 11; a heartbeat whose ack never
 *    came ends the socket (a half-open one) and the session is resumed on a new one;
 * 4. op 0 Dispatch events go on in the order they came; op 7 Reconnect (QQ is about to close the
 *    socket) reconnects and resumes; op 9 Invalid Session (and the close codes that say the session
 *    is gone) identifies anew.
 *
 * Reconnects back off, one attempt at a time, never after stop(). The first connection is made in
 * start(), so a refused token or intent fails the start instead of retrying in silence.
 */
import type { Logger } from "pino";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { type Scrub, backoffDelay } from "../../src/gateway/kit/index.js";
import type { QQApi } from "./open-api.js";
import { type Payload, PayloadSchema } from "./events.js";

export interface GatewayConnectionOptions {
  api: QQApi;
  intents: number;
  /** Takes one dispatch (op 0) other than READY and RESUMED. */
  onDispatch(payload: Payload): void;
  /** Told the bot's user id once READY names it. */
  onReady(bot: { id: string; username?: string }): void;
  onConnection?(change: { connected: boolean; reason?: string }): void;
  scrub: Scrub;
  logger: Logger;
  /** How long start() waits for READY. Default 20 s. */
  connectTimeoutMs?: number;
}

export interface GatewayConnection {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Sessions resumed or opened after the first. */
  readonly reconnects: number;
  /** Sessions taken up again with op 6 Resume. */
  readonly resumes: number;
}

const OP = { dispatch: 0, heartbeat: 1, identify: 2, resume: 6, reconnect: 7, invalidSession: 9, hello: 10, heartbeatAck: 11 } as const;

/** Close codes after which the session cannot be resumed. */
const SESSION_GONE = new Set([4006, 4007, 4008, 4009]);
/** Close codes that say the bot may not connect at all (bad token, intents, the bot banned or offline). */
const REFUSED = new Set([4004, 4013, 4014, 4914, 4915]);

export function createGatewayConnection(options: GatewayConnectionOptions): GatewayConnection {
  return new QQGatewayConnection(options);
}

const send = (target: WebSocket, payload: unknown) => {
  if (target.readyState === WebSocket.OPEN) target.send(JSON.stringify(payload));
};

/** One gateway connection: the socket of the moment, the session it resumes, the heartbeat and the reconnect back-off. */
class QQGatewayConnection implements GatewayConnection {
  private readonly log: Logger;
  private socket: WebSocket | undefined;
  private session: { id: string; seq: number } | undefined;
  private lastSeq: number | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  private stopped = true;
  private down = false;
  private failures = 0;
  private sessions = 0;
  private resumeCount = 0;
  /** Set while start() waits for the first READY (or RESUMED): told it came, or why the socket closed first. */
  private onOpened: ((error?: Error) => void) | undefined;
  private acked = true;

  constructor(private readonly options: GatewayConnectionOptions) {
    this.log = options.logger.child({ channel: "qq", mode: "websocket" });
  }

  get reconnects(): number {
    return Math.max(0, this.sessions - 1);
  }

  get resumes(): number {
    return this.resumeCount;
  }

  async start(): Promise<void> {
    this.stopped = false;
    const timeoutMs = this.options.connectTimeoutMs ?? 20_000;
    let timer: NodeJS.Timeout | undefined;
    const ready = new Promise<void>((resolve, reject) => {
      this.onOpened = (error) => (error ? reject(error) : resolve());
      timer = setTimeout(() => reject(new ChannelError(`qq gateway session not ready after ${timeoutMs} ms`, "qq", { kind: "network" })), timeoutMs);
    });
    try {
      await this.open();
      await ready;
    } catch (error) {
      this.onOpened = undefined;
      this.stopped = true;
      this.socket?.close();
      throw error instanceof ChannelError ? error : new ChannelError(this.options.scrub(`qq gateway connect failed: ${errorMessage(error)}`), "qq", { kind: "network" });
    } finally {
      clearTimeout(timer);
    }
    this.log.info("qq gateway connection open");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    clearInterval(this.heartbeat);
    this.socket?.close(1000, "stopping");
    this.socket = undefined;
  }

  /** Heartbeats every interval; one whose ack never came ends the (half-open) socket. */
  private beat(target: WebSocket, intervalMs: number): void {
    clearInterval(this.heartbeat);
    this.acked = true;
    this.heartbeat = setInterval(() => {
      if (!this.acked) {
        this.log.warn("qq gateway heartbeat not acknowledged; reconnecting");
        target.close(4000, "heartbeat not acknowledged");
        return;
      }
      this.acked = false;
      send(target, { op: OP.heartbeat, d: this.lastSeq ?? null });
    }, intervalMs);
    this.heartbeat.unref();
  }

  /** Op 10: starts the heartbeat, then resumes the session there is or identifies a new one. */
  private async hello(target: WebSocket, data: unknown): Promise<void> {
    const intervalMs = Number((data as { heartbeat_interval?: unknown } | undefined)?.heartbeat_interval);
    this.beat(target, Number.isFinite(intervalMs) && intervalMs > 0 ? intervalMs : 41_250);
    const token = `QQBot ${await this.options.api.accessToken()}`;
    if (this.session) {
      this.resumeCount += 1;
      send(target, { op: OP.resume, d: { token, session_id: this.session.id, seq: this.lastSeq ?? this.session.seq } });
    } else {
      send(target, { op: OP.identify, d: { token, intents: this.options.intents, shard: [0, 1], properties: { $os: process.platform, $browser: "countbot", $device: "countbot" } } });
    }
  }

  private opened(): void {
    this.failures = 0;
    this.sessions += 1;
    if (this.down) this.options.onConnection?.({ connected: true });
    this.down = false;
    this.onOpened?.();
    this.onOpened = undefined;
  }

  private onPayload(target: WebSocket, payload: Payload): void {
    if (typeof payload.s === "number") this.lastSeq = payload.s;
    switch (payload.op) {
      case OP.hello:
        void this.hello(target, payload.d).catch((error: unknown) => {
          this.log.warn({ error: errorMessage(error) }, "qq gateway could not identify");
          target.close(4000, "no token");
        });
        return;
      case OP.heartbeatAck:
        this.acked = true;
        return;
      case OP.heartbeat:
        send(target, { op: OP.heartbeat, d: this.lastSeq ?? null });
        return;
      case OP.reconnect:
        this.log.info("qq asked the gateway connection to reconnect");
        target.close(4000, "reconnect asked");
        return;
      case OP.invalidSession:
        this.log.info("qq gateway session invalid; identifying anew");
        this.session = undefined;
        this.lastSeq = undefined;
        target.close(4000, "invalid session");
        return;
      case OP.dispatch:
        return this.dispatch(payload);
    }
  }

  private dispatch(payload: Payload): void {
    if (payload.t === "READY") {
      const ready = payload.d as { session_id?: unknown; user?: { id?: unknown; username?: unknown } } | undefined;
      if (typeof ready?.session_id === "string") this.session = { id: ready.session_id, seq: this.lastSeq ?? 0 };
      const id = ready?.user?.id;
      if (typeof id === "string") this.options.onReady({ id, ...(typeof ready?.user?.username === "string" ? { username: ready.user.username } : {}) });
      this.log.info({ sessions: this.sessions + 1 }, "qq gateway session ready");
      return this.opened();
    }
    if (payload.t === "RESUMED") {
      this.log.info({ seq: this.lastSeq }, "qq gateway session resumed");
      return this.opened();
    }
    this.options.onDispatch(payload);
  }

  private closed(target: WebSocket, code: number, reason: string): void {
    if (this.socket !== target) return;
    this.socket = undefined;
    clearInterval(this.heartbeat);
    if (SESSION_GONE.has(code)) [this.session, this.lastSeq] = [undefined, undefined];
    const why = `the gateway socket closed (${code}${reason ? ` ${this.options.scrub(reason)}` : ""})`;
    if (this.onOpened) {
      this.onOpened(new ChannelError(`qq gateway refused the session: ${why}`, "qq", { kind: REFUSED.has(code) ? "auth" : "network" }));
      this.onOpened = undefined;
      return;
    }
    if (this.stopped) return;
    if (!this.down) this.options.onConnection?.({ connected: false, reason: why });
    this.down = true;
    this.failures += 1;
    this.log.warn({ code, failures: this.failures }, "qq gateway socket closed; reconnecting");
    this.schedule();
  }

  /** One reconnect attempt at a time, backing off; never after stop(). */
  private schedule(): void {
    if (this.stopped || this.retry) return;
    const delayMs = this.failures <= 1 ? 0 : backoffDelay(this.failures - 1, 1_000, 60_000);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.open().catch((error: unknown) => {
        this.failures += 1;
        this.log.warn({ error: this.options.scrub(errorMessage(error)), failures: this.failures }, "qq gateway connection failed; trying again");
        this.schedule();
      });
    }, delayMs);
    this.retry.unref();
  }

  /** Asks QQ for the socket's URL and dials it. */
  private async open(): Promise<void> {
    if (this.stopped) return;
    const { url } = await this.options.api.call<{ url?: unknown }>("gateway", "GET", "/gateway");
    if (typeof url !== "string" || url === "") throw new ChannelError("qq /gateway answered without a url", "qq");
    if (this.stopped) return;
    const target = new WebSocket(url);
    this.socket = target;
    target.addEventListener("message", (message) => {
      let payload: Payload;
      try {
        payload = PayloadSchema.parse(JSON.parse(String(message.data)));
      } catch {
        this.log.warn("qq gateway frame not understood; skipped");
        return;
      }
      this.onPayload(target, payload);
    });
    target.addEventListener("close", (event) => this.closed(target, event.code, event.reason));
    target.addEventListener("error", () => undefined);
  }
}
