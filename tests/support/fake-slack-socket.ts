/**
 * The Socket Mode side of the fake Slack (see fake-slack-server.ts): WebSocket connections opened
 * at the URL `apps.connections.open` handed out (each ticket once), and Slack's JSON envelopes
 * over them:
 *
 * - `{type: "hello", num_connections, connection_info, debug_info}` on connect;
 * - `{envelope_id, type: "events_api" | "slash_commands" | "interactive", payload,
 *   accepts_response_payload, retry_attempt, retry_reason}` down; `{envelope_id, payload?}` up
 *   is the acknowledgement. An envelope not acknowledged within `redeliverAfterMs` is sent again
 *   with `retry_attempt` one higher (`retry_reason: "timeout"`), to whichever connection is live,
 *   and envelopes pushed while none is wait;
 * - `{type: "disconnect", reason}` before Slack recycles a connection; WebSocket pings every few
 *   seconds (the SDK drops a connection that stops being pinged).
 */
import { randomUUID } from "node:crypto";
import type { WebSocket } from "ws";

export type EnvelopeType = "events_api" | "slash_commands" | "interactive";

export interface PushOptions {
  /** Acknowledgements to ignore (as if lost on the way) before one counts. */
  ignoreAcks?: number;
  timeoutMs?: number;
}

export interface FakeSocket {
  accept(socket: WebSocket): void;
  readonly liveConnections: number;
  /** Acknowledgements received, by envelope id. */
  readonly acks: Map<string, number>;
  /** Envelopes sent (deliveries, redeliveries included), in order. */
  readonly sent: Array<{ envelopeId: string; type: EnvelopeType; retryAttempt: number }>;
  push(type: EnvelopeType, payload: unknown, options?: PushOptions): Promise<{ deliveries: number; ackPayload?: unknown }>;
  disconnect(reason?: string): void;
  dropConnections(): void;
  close(): void;
}

interface Delivery {
  envelopeId: string;
  type: EnvelopeType;
  payload: unknown;
  ignoreAcks: number;
  deliveries: number;
  timer?: NodeJS.Timeout;
  done(ackPayload: unknown): void;
}

export function createFakeSocket(options: { appId: string; redeliverAfterMs: number; pingIntervalMs?: number }): FakeSocket {
  const connections = new Set<WebSocket>();
  const pending = new Map<string, Delivery>();
  const queued: Delivery[] = [];
  const acks = new Map<string, number>();
  const sent: FakeSocket["sent"] = [];
  const pinger = setInterval(() => {
    for (const socket of connections) if (socket.readyState === socket.OPEN) socket.ping();
  }, options.pingIntervalMs ?? 5_000);
  pinger.unref();

  function onFrame(data: Buffer): void {
    let frame: { envelope_id?: string; payload?: unknown };
    try {
      frame = JSON.parse(data.toString("utf8")) as typeof frame;
    } catch {
      return;
    }
    const envelopeId = frame.envelope_id ?? "";
    const delivery = pending.get(envelopeId);
    if (!delivery) return;
    acks.set(envelopeId, (acks.get(envelopeId) ?? 0) + 1);
    if (delivery.ignoreAcks > 0) {
      delivery.ignoreAcks -= 1;
      return;
    }
    clearTimeout(delivery.timer);
    pending.delete(envelopeId);
    delivery.done(frame.payload);
  }

  function live(): WebSocket | undefined {
    const open = [...connections].filter((socket) => socket.readyState === socket.OPEN);
    return open[Math.floor(Math.random() * open.length)];
  }

  function send(delivery: Delivery): void {
    const socket = live();
    if (!socket) {
      queued.push(delivery);
      return;
    }
    const retryAttempt = delivery.deliveries;
    delivery.deliveries += 1;
    sent.push({ envelopeId: delivery.envelopeId, type: delivery.type, retryAttempt });
    socket.send(
      JSON.stringify({
        envelope_id: delivery.envelopeId,
        type: delivery.type,
        payload: delivery.payload,
        accepts_response_payload: delivery.type !== "events_api",
        ...(delivery.type === "events_api" ? { retry_attempt: retryAttempt, retry_reason: retryAttempt === 0 ? "" : "timeout" } : {}),
      }),
    );
    clearTimeout(delivery.timer);
    delivery.timer = setTimeout(() => send(delivery), options.redeliverAfterMs);
  }

  return {
    accept(socket) {
      connections.add(socket);
      socket.on("message", onFrame);
      socket.on("close", () => connections.delete(socket));
      socket.on("error", () => connections.delete(socket));
      socket.send(
        JSON.stringify({
          type: "hello",
          num_connections: connections.size,
          debug_info: { host: "fake-slack", build_number: 1, approximate_connection_time: 18060 },
          connection_info: { app_id: options.appId },
        }),
      );
      for (const delivery of queued.splice(0)) send(delivery);
    },
    get liveConnections() {
      return [...connections].filter((socket) => socket.readyState === socket.OPEN).length;
    },
    acks,
    sent,
    push(type, payload, pushOptions = {}) {
      const timeoutMs = pushOptions.timeoutMs ?? 20_000;
      return new Promise((resolve, reject) => {
        const delivery: Delivery = { envelopeId: randomUUID(), type, payload, ignoreAcks: pushOptions.ignoreAcks ?? 0, deliveries: 0, done: () => undefined };
        const timer = setTimeout(() => {
          clearTimeout(delivery.timer);
          pending.delete(delivery.envelopeId);
          reject(new Error(`fake Slack: envelope ${delivery.envelopeId} (${type}) not acknowledged within ${timeoutMs} ms`));
        }, timeoutMs);
        delivery.done = (ackPayload) => {
          clearTimeout(timer);
          resolve({ deliveries: delivery.deliveries, ackPayload });
        };
        pending.set(delivery.envelopeId, delivery);
        send(delivery);
      });
    },
    disconnect(reason = "refresh_requested") {
      for (const socket of connections) socket.send(JSON.stringify({ type: "disconnect", reason, debug_info: { host: "fake-slack" } }));
    },
    dropConnections() {
      for (const socket of connections) socket.terminate();
    },
    close() {
      clearInterval(pinger);
      for (const delivery of [...pending.values(), ...queued]) clearTimeout(delivery.timer);
      for (const socket of connections) socket.terminate();
    },
  };
}
