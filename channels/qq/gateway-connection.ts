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
  const log = options.logger.child({ channel: "qq", mode: "websocket" });
  let socket: WebSocket | undefined;
  let session: { id: string; seq: number } | undefined;
  let lastSeq: number | undefined;
  let heartbeat: NodeJS.Timeout | undefined;
  let retry: NodeJS.Timeout | undefined;
  let stopped = true;
  let down = false;
  let failures = 0;
  let sessions = 0;
  let resumes = 0;
  let onOpened: ((error?: Error) => void) | undefined;
  let acked = true;

  const send = (target: WebSocket, payload: unknown) => {
    if (target.readyState === WebSocket.OPEN) target.send(JSON.stringify(payload));
  };

  function beat(target: WebSocket, intervalMs: number): void {
    clearInterval(heartbeat);
    acked = true;
    heartbeat = setInterval(() => {
      if (!acked) {
        log.warn("qq gateway heartbeat not acknowledged; reconnecting");
        target.close(4000, "heartbeat not acknowledged");
        return;
      }
      acked = false;
      send(target, { op: OP.heartbeat, d: lastSeq ?? null });
    }, intervalMs);
    heartbeat.unref();
  }

  async function hello(target: WebSocket, data: unknown): Promise<void> {
    const intervalMs = Number((data as { heartbeat_interval?: unknown } | undefined)?.heartbeat_interval);
    beat(target, Number.isFinite(intervalMs) && intervalMs > 0 ? intervalMs : 41_250);
    const token = `QQBot ${await options.api.accessToken()}`;
    if (session) {
      resumes += 1;
      send(target, { op: OP.resume, d: { token, session_id: session.id, seq: lastSeq ?? session.seq } });
    } else {
      send(target, { op: OP.identify, d: { token, intents: options.intents, shard: [0, 1], properties: { $os: process.platform, $browser: "countbot", $device: "countbot" } } });
    }
  }

  function opened(): void {
    failures = 0;
    sessions += 1;
    if (down) options.onConnection?.({ connected: true });
    down = false;
    onOpened?.();
    onOpened = undefined;
  }

  function onPayload(target: WebSocket, payload: Payload): void {
    if (typeof payload.s === "number") lastSeq = payload.s;
    switch (payload.op) {
      case OP.hello:
        void hello(target, payload.d).catch((error: unknown) => {
          log.warn({ error: errorMessage(error) }, "qq gateway could not identify");
          target.close(4000, "no token");
        });
        return;
      case OP.heartbeatAck:
        acked = true;
        return;
      case OP.heartbeat:
        send(target, { op: OP.heartbeat, d: lastSeq ?? null });
        return;
      case OP.reconnect:
        log.info("qq asked the gateway connection to reconnect");
        target.close(4000, "reconnect asked");
        return;
      case OP.invalidSession:
        log.info("qq gateway session invalid; identifying anew");
        session = undefined;
        lastSeq = undefined;
        target.close(4000, "invalid session");
        return;
      case OP.dispatch:
        return dispatch(payload);
    }
  }

  function dispatch(payload: Payload): void {
    if (payload.t === "READY") {
      const ready = payload.d as { session_id?: unknown; user?: { id?: unknown; username?: unknown } } | undefined;
      if (typeof ready?.session_id === "string") session = { id: ready.session_id, seq: lastSeq ?? 0 };
      const id = ready?.user?.id;
      if (typeof id === "string") options.onReady({ id, ...(typeof ready?.user?.username === "string" ? { username: ready.user.username } : {}) });
      log.info({ sessions: sessions + 1 }, "qq gateway session ready");
      return opened();
    }
    if (payload.t === "RESUMED") {
      log.info({ seq: lastSeq }, "qq gateway session resumed");
      return opened();
    }
    options.onDispatch(payload);
  }

  function closed(target: WebSocket, code: number, reason: string): void {
    if (socket !== target) return;
    socket = undefined;
    clearInterval(heartbeat);
    if (SESSION_GONE.has(code)) [session, lastSeq] = [undefined, undefined];
    const why = `the gateway socket closed (${code}${reason ? ` ${options.scrub(reason)}` : ""})`;
    if (onOpened) {
      onOpened(new ChannelError(`qq gateway refused the session: ${why}`, "qq", { kind: REFUSED.has(code) ? "auth" : "network" }));
      onOpened = undefined;
      return;
    }
    if (stopped) return;
    if (!down) options.onConnection?.({ connected: false, reason: why });
    down = true;
    failures += 1;
    log.warn({ code, failures }, "qq gateway socket closed; reconnecting");
    schedule();
  }

  function schedule(): void {
    if (stopped || retry) return;
    const delayMs = failures <= 1 ? 0 : backoffDelay(failures - 1, 1_000, 60_000);
    retry = setTimeout(() => {
      retry = undefined;
      void open().catch((error: unknown) => {
        failures += 1;
        log.warn({ error: options.scrub(errorMessage(error)), failures }, "qq gateway connection failed; trying again");
        schedule();
      });
    }, delayMs);
    retry.unref();
  }

  async function open(): Promise<void> {
    if (stopped) return;
    const { url } = await options.api.call<{ url?: unknown }>("gateway", "GET", "/gateway");
    if (typeof url !== "string" || url === "") throw new ChannelError("qq /gateway answered without a url", "qq");
    if (stopped) return;
    const target = new WebSocket(url);
    socket = target;
    target.addEventListener("message", (message) => {
      let payload: Payload;
      try {
        payload = PayloadSchema.parse(JSON.parse(String(message.data)));
      } catch {
        log.warn("qq gateway frame not understood; skipped");
        return;
      }
      onPayload(target, payload);
    });
    target.addEventListener("close", (event) => closed(target, event.code, event.reason));
    target.addEventListener("error", () => undefined);
  }

  return {
    get reconnects() {
      return Math.max(0, sessions - 1);
    },
    get resumes() {
      return resumes;
    },
    async start() {
      stopped = false;
      const timeoutMs = options.connectTimeoutMs ?? 20_000;
      let timer: NodeJS.Timeout | undefined;
      const ready = new Promise<void>((resolve, reject) => {
        onOpened = (error) => (error ? reject(error) : resolve());
        timer = setTimeout(() => reject(new ChannelError(`qq gateway session not ready after ${timeoutMs} ms`, "qq", { kind: "network" })), timeoutMs);
      });
      try {
        await open();
        await ready;
      } catch (error) {
        onOpened = undefined;
        stopped = true;
        socket?.close();
        throw error instanceof ChannelError ? error : new ChannelError(options.scrub(`qq gateway connect failed: ${errorMessage(error)}`), "qq", { kind: "network" });
      } finally {
        clearTimeout(timer);
      }
      log.info("qq gateway connection open");
    },
    async stop() {
      stopped = true;
      clearTimeout(retry);
      clearInterval(heartbeat);
      socket?.close(1000, "stopping");
      socket = undefined;
    },
  };
}
