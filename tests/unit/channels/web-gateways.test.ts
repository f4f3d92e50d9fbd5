/**
 * Two gateways over one Redis: each consumes a share of the web channel's replies, yet a browser
 * socket held by either gateway receives every reply of its chat.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createRedisBus } from "../../../src/bus/redis-bus.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";
import { type WebGateway, startWebGateway } from "../../support/web-gateway.js";

let redis: Redis;
let prefix: string;
const buses: MessageBus[] = [];
const servers: WebGateway[] = [];

beforeEach(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  prefix = `countbot-web-${randomUUID()}`;
});
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
  for (const bus of buses.splice(0)) await bus.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

async function gateway(): Promise<string> {
  const bus = createRedisBus({ redis, prefix });
  buses.push(bus);
  const gateway = await startWebGateway({ bus, logger: pino({ level: "silent" }) });
  servers.push(gateway);
  return gateway.url;
}

describe("web channel across gateways", () => {
  it("delivers every reply of a chat to a socket on either gateway", async () => {
    await gateway();
    const second = await gateway();
    const received: string[] = [];
    const socket = new WebSocket(`${second.replace("http", "ws")}/ws?chatId=visitor`);
    socket.on("message", (data) => {
      const event = JSON.parse(String(data)) as { type: string; content: string };
      if (event.type === "message") received.push(event.content);
    });
    await new Promise((resolve) => socket.once("open", resolve));
    const publisher = buses[0]!;
    for (let index = 0; index < 20; index += 1) {
      await publisher.publishOutbound({ id: `reply-${index}`, channel: "web", chatId: "visitor", content: `reply ${index}`, kind: "final", media: [], metadata: {} });
    }
    const deadline = Date.now() + 10_000;
    while (new Set(received).size < 20 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    socket.close();
    expect(new Set(received)).toEqual(new Set(Array.from({ length: 20 }, (_, index) => `reply ${index}`)));
  });
});
