/**
 * The WebSocket gateway of the fake QQ platform, as QQ speaks it: op 10 Hello with a heartbeat
 * interval; op 2 Identify (a valid `QQBot <token>`, intents) answered by the READY dispatch with a
 * session id and the bot's user; op 1 Heartbeat answered by op 11; op 6 Resume (session id and
 * last seq) answered by the events the session missed, then RESUMED; op 0 dispatches numbered by
 * `s` per session. On demand: op 7 Reconnect, op 9 Invalid Session, a dropped socket.
 *
 * Events go to the one live session (as QQ delivers each to one shard), and are kept in its log, so
 * a session resumed after a drop gets what was dispatched while it was away.
 */
import { randomUUID } from "node:crypto";
import type { WebSocket } from "ws";
import type { QQEvent } from "./qq-events.js";

export interface GatewaySession {
  id: string;
  intents: number;
  /** Dispatches, with their `s`. */
  log: Array<{ s: number; payload: Record<string, unknown> }>;
  socket?: WebSocket;
  /** Resumes this session took. */
  resumes: number;
}

export interface FakeQQGateway {
  accept(socket: WebSocket): void;
  readonly sessions: GatewaySession[];
  readonly identifies: number;
  readonly heartbeats: number;
  /** Dispatches an event to the live session (or, none live, to the last one's log for a resume); `times` sends it that often. */
  dispatch(event: QQEvent, times?: number): void;
  /** Heartbeats go unanswered while false (a half-open socket, as the bot sees it). */
  ackHeartbeats: boolean;
  reconnect(): void;
  invalidate(): void;
  drop(): void;
  readonly live: number;
  close(): void;
}

export function createFakeQQGateway(options: { validToken(token: string): boolean; bot: { id: string; username: string }; heartbeatIntervalMs: number }): FakeQQGateway {
  const sessions: GatewaySession[] = [];
  let identifies = 0;
  let heartbeats = 0;
  let ackHeartbeats = true;

  const send = (socket: WebSocket | undefined, payload: unknown) => {
    if (socket && socket.readyState === socket.OPEN) socket.send(JSON.stringify(payload));
  };

  function push(session: GatewaySession, payload: Record<string, unknown>): void {
    const s = (session.log.at(-1)?.s ?? 0) + 1;
    session.log.push({ s, payload });
    send(session.socket, { op: 0, s, ...payload });
  }

  function onFrame(socket: WebSocket, frame: { op?: number; d?: Record<string, unknown> | number | null }): void {
    const data = typeof frame.d === "object" && frame.d !== null ? frame.d : {};
    if (frame.op === 1) {
      heartbeats += 1;
      if (ackHeartbeats) send(socket, { op: 11 });
      return;
    }
    const token = String(data.token ?? "");
    if ((frame.op === 2 || frame.op === 6) && (!token.startsWith("QQBot ") || !options.validToken(token.slice(6)))) return socket.close(4004, "invalid token");
    if (frame.op === 2) {
      identifies += 1;
      const session: GatewaySession = { id: randomUUID(), intents: Number(data.intents), log: [], socket, resumes: 0 };
      sessions.push(session);
      return push(session, { t: "READY", d: { version: 1, session_id: session.id, user: { ...options.bot, bot: true }, shard: [0, 1] } });
    }
    if (frame.op === 6) {
      const session = sessions.find((candidate) => candidate.id === data.session_id);
      if (!session) return send(socket, { op: 9, d: false });
      session.socket = socket;
      session.resumes += 1;
      const seq = Number(data.seq);
      for (const entry of session.log.filter((logged) => logged.s > seq)) send(socket, { op: 0, s: entry.s, ...entry.payload });
      return push(session, { t: "RESUMED", d: "" });
    }
  }

  const liveSession = () => [...sessions].reverse().find((session) => session.socket?.readyState === 1) ?? sessions.at(-1);

  return {
    accept(socket) {
      socket.on("message", (raw) => {
        try {
          onFrame(socket, JSON.parse(String(raw)) as { op?: number; d?: Record<string, unknown> });
        } catch {
          socket.close(4001, "invalid payload");
        }
      });
      socket.on("close", () => {
        for (const session of sessions) if (session.socket === socket) session.socket = undefined;
      });
      send(socket, { op: 10, d: { heartbeat_interval: options.heartbeatIntervalMs } });
    },
    sessions,
    get identifies() {
      return identifies;
    },
    get heartbeats() {
      return heartbeats;
    },
    dispatch(event, times = 1) {
      const session = liveSession();
      if (!session) throw new Error("fake QQ: no gateway session to dispatch to");
      for (let count = 0; count < times; count++) push(session, { t: event.t, id: event.id, d: event.d });
    },
    get ackHeartbeats() {
      return ackHeartbeats;
    },
    set ackHeartbeats(value) {
      ackHeartbeats = value;
    },
    reconnect() {
      for (const session of sessions) send(session.socket, { op: 7 });
    },
    invalidate() {
      for (const session of sessions) send(session.socket, { op: 9, d: false });
    },
    drop() {
      for (const session of sessions) session.socket?.terminate();
    },
    get live() {
      return sessions.filter((session) => session.socket?.readyState === 1).length;
    },
    close() {
      for (const session of sessions) session.socket?.terminate();
    },
  };
}
