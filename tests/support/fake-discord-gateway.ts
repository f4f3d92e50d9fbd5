/**
 * The WebSocket half of the fake Discord (see fake-discord-server.ts): the Gateway v10 protocol as
 * discord.js speaks it, JSON encoding, no compression.
 *
 * HELLO on connect; heartbeat (op 1) answered with HEARTBEAT_ACK (op 11); IDENTIFY (op 2) checked
 * for the token, answered with READY (session_id, resume_gateway_url pointing back here) and one
 * GUILD_CREATE per guild; RESUME (op 6) of a known session replays the events it missed, then
 * RESUMED; an unknown session gets INVALID_SESSION (op 9, not resumable). Dispatches are filtered by
 * the session's intents, and without MESSAGE_CONTENT a guild message that does not mention the bot
 * loses its content, as on Discord.
 *
 * Sessions outlive their socket: events dispatched while a session is disconnected are kept for its
 * resume. A client that closes with 1000 or 1001 ends its session; a dropped socket does not.
 */
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { randomUUID } from "node:crypto";
import { WebSocket, WebSocketServer } from "ws";

export const Intents = {
  Guilds: 1 << 0,
  GuildMessages: 1 << 9,
  DirectMessages: 1 << 12,
  MessageContent: 1 << 15,
} as const;

/** One frame the gateway received from a client. */
export interface GatewayReceived {
  op: number;
  d: unknown;
  /** `gateway` (the URL of GET /gateway/bot) or `resume` (resume_gateway_url). */
  via: "gateway" | "resume";
  sessionId?: string;
  at: number;
}

interface LoggedEvent {
  s: number;
  t: string;
  d: Record<string, unknown>;
}

interface Session {
  id: string;
  intents: number;
  seq: number;
  log: LoggedEvent[];
  socket?: WebSocket;
  /** READY or RESUMED was sent on the current socket: live dispatches may flow. */
  live: boolean;
}

export interface GatewayHooks {
  token: string;
  /** The payload of READY (user, application, guild stubs), without session fields. */
  ready(): Record<string, unknown>;
  /** The GUILD_CREATE payloads sent after READY. */
  guilds(): Array<Record<string, unknown>>;
  /** Whether a MESSAGE_CREATE mentions the bot (keeps its content without the MessageContent intent). */
  mentionsBot(message: Record<string, unknown>): boolean;
  heartbeatIntervalMs: number;
  /** Whether the app may use privileged intents (Message Content); if not, IDENTIFY asking for it is closed with 4014. */
  privilegedIntents: boolean;
}

export type ResumeFailure = "drop" | "invalid-resumable" | "invalid";

const maxLogged = 2_000;

function intentOf(type: string, payload: Record<string, unknown>): number | undefined {
  if (type === "GUILD_CREATE" || type.startsWith("THREAD_") || type.startsWith("CHANNEL_")) return Intents.Guilds;
  if (type.startsWith("MESSAGE_")) return payload.guild_id ? Intents.GuildMessages : Intents.DirectMessages;
  return undefined;
}

export function createFakeGateway(hooks: GatewayHooks) {
  const server = new WebSocketServer({ noServer: true });
  const sessions = new Map<string, Session>();
  const received: GatewayReceived[] = [];
  const sockets = new Set<WebSocket>();
  const resumeFailures: ResumeFailure[] = [];
  const socketSession = new WeakMap<WebSocket, Session>();
  let origin = "";

  function send(socket: WebSocket, frame: Record<string, unknown>): void {
    if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
  }

  /** The payload as this session may see it (intents), or undefined when it may not. */
  function visible(session: Session, type: string, payload: Record<string, unknown>): Record<string, unknown> | undefined {
    const intent = intentOf(type, payload);
    if (intent !== undefined && (session.intents & intent) === 0) return undefined;
    if (type === "MESSAGE_CREATE" && payload.guild_id && (session.intents & Intents.MessageContent) === 0 && !hooks.mentionsBot(payload)) {
      return { ...payload, content: "", attachments: [], embeds: [] };
    }
    return payload;
  }

  function record(session: Session, type: string, payload: Record<string, unknown>): LoggedEvent | undefined {
    const shown = visible(session, type, payload);
    if (!shown) return undefined;
    const event = { s: ++session.seq, t: type, d: shown };
    session.log.push(event);
    if (session.log.length > maxLogged) session.log.shift();
    return event;
  }

  function sendEvent(session: Session, event: LoggedEvent): void {
    if (session.socket) send(session.socket, { op: 0, s: event.s, t: event.t, d: event.d });
  }

  function dispatch(type: string, payload: Record<string, unknown>): void {
    for (const session of sessions.values()) {
      const event = record(session, type, payload);
      if (event && session.live) sendEvent(session, event);
    }
  }

  function identify(socket: WebSocket, data: { token?: string; intents?: number }): void {
    if (data.token !== hooks.token) return void socket.close(4004, "Authentication failed.");
    if (!hooks.privilegedIntents && ((data.intents ?? 0) & Intents.MessageContent) !== 0) return void socket.close(4014, "Disallowed intent(s).");
    const session: Session = { id: randomUUID().replace(/-/g, ""), intents: data.intents ?? 0, seq: 0, log: [], socket, live: false };
    sessions.set(session.id, session);
    socketSession.set(socket, session);
    const ready = { v: 10, ...hooks.ready(), session_id: session.id, resume_gateway_url: `${origin}/resume`, shard: [0, 1] };
    sendEvent(session, record(session, "READY", ready)!);
    session.live = true;
    for (const guild of hooks.guilds()) {
      const event = record(session, "GUILD_CREATE", guild);
      if (event) sendEvent(session, event);
    }
  }

  function resume(socket: WebSocket, data: { token?: string; session_id?: string; seq?: number }): void {
    if (data.token !== hooks.token) return void socket.close(4004, "Authentication failed.");
    const failure = resumeFailures.shift();
    if (failure === "drop") return void socket.terminate();
    if (failure === "invalid-resumable") return send(socket, { op: 9, d: true });
    const session = data.session_id ? sessions.get(data.session_id) : undefined;
    if (!session || failure === "invalid") {
      if (session) sessions.delete(session.id);
      return send(socket, { op: 9, d: false });
    }
    if (session.socket && session.socket !== socket) session.socket.terminate();
    session.socket = socket;
    socketSession.set(socket, session);
    const after = data.seq ?? 0;
    for (const event of session.log) if (event.s > after) sendEvent(session, event);
    sendEvent(session, record(session, "RESUMED", {})!);
    session.live = true;
  }

  server.on("connection", (socket: WebSocket, incoming: IncomingMessage) => {
    const via = incoming.url?.startsWith("/resume") ? "resume" : "gateway";
    sockets.add(socket);
    send(socket, { op: 10, d: { heartbeat_interval: hooks.heartbeatIntervalMs } });
    socket.on("message", (raw) => {
      let frame: { op?: number; d?: unknown };
      try {
        frame = JSON.parse(String(raw)) as { op?: number; d?: unknown };
      } catch {
        return void socket.close(4002, "Error while decoding payload.");
      }
      const session = socketSession.get(socket);
      received.push({ op: frame.op ?? -1, d: frame.d, via, sessionId: session?.id, at: Date.now() });
      if (frame.op === 1) return send(socket, { op: 11 });
      if (frame.op === 2) return identify(socket, (frame.d ?? {}) as { token?: string; intents?: number });
      if (frame.op === 6) return resume(socket, (frame.d ?? {}) as { token?: string; session_id?: string; seq?: number });
    });
    socket.on("close", (code) => {
      sockets.delete(socket);
      const session = socketSession.get(socket);
      if (!session || session.socket !== socket) return;
      session.socket = undefined;
      session.live = false;
      // A clean close ends the session on Discord; a dropped socket or 4xxx keeps it resumable.
      if (code === 1000 || code === 1001) sessions.delete(session.id);
    });
  });

  return {
    received,
    /** Sets the `ws://host:port` the READY payload's resume_gateway_url points at. */
    setOrigin(value: string) {
      origin = value;
    },
    handleUpgrade(incoming: IncomingMessage, socket: Duplex, head: Buffer) {
      server.handleUpgrade(incoming, socket, head, (client) => server.emit("connection", client, incoming));
    },
    dispatch,
    /** Sockets that completed IDENTIFY or RESUME and receive dispatches now. */
    get liveConnections(): number {
      return [...sessions.values()].filter((session) => session.live).length;
    },
    get openSockets(): number {
      return sockets.size;
    },
    /** Cuts every socket without a close frame (the client sees 1006), or closes with `code`. */
    dropConnections(code?: number) {
      for (const socket of sockets) {
        if (code === undefined) socket.terminate();
        else socket.close(code);
      }
    },
    /** Sends INVALID_SESSION to every live socket; not resumable also forgets the sessions. */
    invalidateSessions(resumable: boolean) {
      for (const session of [...sessions.values()]) {
        if (!session.socket) continue;
        session.live = false;
        send(session.socket, { op: 9, d: resumable });
        if (!resumable) sessions.delete(session.id);
      }
    },
    /** The next `count` RESUMEs fail: the socket is cut, or INVALID_SESSION (resumable or not) answers it. */
    failResumes(count: number, how: ResumeFailure) {
      for (let index = 0; index < count; index++) resumeFailures.push(how);
    },
    close() {
      for (const socket of sockets) socket.terminate();
      server.close();
    },
  };
}

export type FakeGateway = ReturnType<typeof createFakeGateway>;
