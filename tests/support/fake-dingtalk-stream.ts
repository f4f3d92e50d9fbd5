/**
 * The Stream side of the fake DingTalk (see fake-dingtalk-server.ts): the WebSocket connections
 * opened with a ticket, and DingTalk's JSON frames over them. A robot message goes as a CALLBACK
 * frame to ONE live connection and counts as delivered once the client acknowledges its
 * `messageId` (`{code: 200, headers: {messageId}}`); one not acknowledged within `redeliverAfterMs`
 * is sent again, to whichever connection is live then, and messages pushed while none is wait.
 * SYSTEM frames: `ping` (the client echoes it back) and `disconnect` (the socket closes soon after).
 */
import { randomUUID } from "node:crypto";
import type { WebSocket } from "ws";
import type { RobotMessageJson } from "./dingtalk-messages.js";

export const ROBOT_TOPIC = "/v1.0/im/bot/messages/get";

export interface FakeStream {
  /** Takes a socket the server upgraded. */
  accept(socket: WebSocket): void;
  readonly liveConnections: number;
  /** Acknowledgements received, by robot msgId. */
  readonly acks: Map<string, number>;
  push(message: RobotMessageJson, options?: { ignoreAcks?: number; timeoutMs?: number }): Promise<{ deliveries: number }>;
  ping(): Promise<void>;
  disconnect(graceMs?: number): void;
  dropConnections(): void;
  close(): void;
}

interface Delivery {
  frameId: string;
  message: RobotMessageJson;
  ignoreAcks: number;
  deliveries: number;
  timer?: NodeJS.Timeout;
  done(): void;
}

export function createFakeStream(options: { appKey: string; redeliverAfterMs: number }): FakeStream {
  const connections = new Set<WebSocket>();
  const pending = new Map<string, Delivery>();
  const queued: Delivery[] = [];
  const acks = new Map<string, number>();
  const pings = new Map<string, () => void>();

  function onFrame(data: Buffer): void {
    let frame: { code?: number; headers?: { messageId?: string } };
    try {
      frame = JSON.parse(data.toString("utf8")) as typeof frame;
    } catch {
      return;
    }
    const frameId = frame.headers?.messageId ?? "";
    pings.get(frameId)?.();
    const delivery = pending.get(frameId);
    if (!delivery || frame.code !== 200) return;
    acks.set(delivery.message.msgId, (acks.get(delivery.message.msgId) ?? 0) + 1);
    if (delivery.ignoreAcks > 0) {
      delivery.ignoreAcks -= 1;
      return;
    }
    clearTimeout(delivery.timer);
    pending.delete(frameId);
    delivery.done();
  }

  function live(): WebSocket | undefined {
    const open = [...connections].filter((socket) => socket.readyState === socket.OPEN);
    return open[Math.floor(Math.random() * open.length)];
  }

  /** Sends a delivery to one live connection (or queues it), and again later until it is acknowledged. */
  function send(delivery: Delivery): void {
    const socket = live();
    if (!socket) {
      queued.push(delivery);
      return;
    }
    delivery.deliveries += 1;
    const headers = { appId: options.appKey, connectionId: randomUUID(), contentType: "application/json", messageId: delivery.frameId, time: String(Date.now()), topic: ROBOT_TOPIC };
    socket.send(JSON.stringify({ specVersion: "1.0", type: "CALLBACK", headers, data: JSON.stringify(delivery.message) }));
    clearTimeout(delivery.timer);
    delivery.timer = setTimeout(() => send(delivery), options.redeliverAfterMs);
  }

  function system(topic: string, data: unknown): string {
    const messageId = randomUUID();
    const frame = JSON.stringify({ specVersion: "1.0", type: "SYSTEM", headers: { contentType: "application/json", messageId, time: String(Date.now()), topic }, data: JSON.stringify(data) });
    for (const socket of connections) socket.send(frame);
    return messageId;
  }

  return {
    accept(socket) {
      connections.add(socket);
      socket.on("message", onFrame);
      socket.on("close", () => connections.delete(socket));
      socket.on("error", () => connections.delete(socket));
      for (const delivery of queued.splice(0)) send(delivery);
    },
    get liveConnections() {
      return [...connections].filter((socket) => socket.readyState === socket.OPEN).length;
    },
    acks,
    push(message, pushOptions = {}) {
      const timeoutMs = pushOptions.timeoutMs ?? 20_000;
      return new Promise((resolve, reject) => {
        const delivery: Delivery = { frameId: randomUUID(), message, ignoreAcks: pushOptions.ignoreAcks ?? 0, deliveries: 0, done: () => undefined };
        const timer = setTimeout(() => {
          clearTimeout(delivery.timer);
          pending.delete(delivery.frameId);
          reject(new Error(`fake DingTalk: ${message.msgId} not acknowledged within ${timeoutMs} ms`));
        }, timeoutMs);
        delivery.done = () => {
          clearTimeout(timer);
          resolve({ deliveries: delivery.deliveries });
        };
        pending.set(delivery.frameId, delivery);
        send(delivery);
      });
    },
    async ping() {
      const echoes = [...connections].map(() => new Promise<void>((resolve) => pings.set(system("ping", { opaque: randomUUID() }), resolve)));
      await Promise.all(echoes);
    },
    disconnect(graceMs = 200) {
      const closing = [...connections];
      system("disconnect", { reason: "server maintenance" });
      setTimeout(() => closing.forEach((socket) => socket.close()), graceMs).unref();
    },
    dropConnections() {
      for (const socket of connections) socket.terminate();
    },
    close() {
      for (const delivery of [...pending.values(), ...queued]) clearTimeout(delivery.timer);
      for (const socket of connections) socket.terminate();
    },
  };
}
