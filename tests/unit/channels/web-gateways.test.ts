/**
 * Gateways over one Redis: each consumes a share of the web channel's replies, yet a browser socket
 * held by either gateway receives every reply of its chat, once; replies kept for a page that was
 * away survive the gateway that kept them.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createRedisBus } from "../../../src/bus/redis-bus.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { createRedisChatEventLog } from "../../../src/store/redis-chat-event-log.js";
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

async function start(): Promise<WebGateway> {
  const bus = createRedisBus({ redis, prefix });
  buses.push(bus);
  const gateway = await startWebGateway({ bus, events: createRedisChatEventLog({ redis, prefix, channel: "web" }), logger: pino({ level: "silent" }) });
  servers.push(gateway);
  return gateway;
}

async function gateway(): Promise<string> {
  return (await start()).url;
}

interface Page {
  finals: Array<{ id: string; seq: string }>;
  socket: WebSocket;
}

async function open(url: string, chatId: string, after?: string): Promise<Page> {
  const finals: Page["finals"] = [];
  const socket = new WebSocket(`${url.replace("http", "ws")}/ws?chatId=${chatId}${after ? `&after=${after}` : ""}`);
  socket.on("message", (data) => {
    const event = JSON.parse(String(data)) as { type: string; id: string; seq: string };
    if (event.type === "message") finals.push({ id: event.id, seq: event.seq });
  });
  await new Promise((resolve) => socket.once("open", resolve));
  return { finals, socket };
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const final = (chatId: string, id: string) => ({ id, channel: "web", chatId, content: `reply ${id}`, kind: "final" as const, media: [], metadata: {} });

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
    // Once each: the gateway that delivered a final marked it, the other does not send it again.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(received).toHaveLength(20);
  });

  it("gives a page that was away each final once, from a gateway started after the one that kept them stopped", async () => {
    const first = await start();
    for (let index = 0; index < 3; index += 1) await buses[0]!.publishOutbound(final("away", `reply-${index}`));
    const log = createRedisChatEventLog({ redis, prefix, channel: "web" });
    await until(async () => (await log.since("away")).events.length === 3, "the finals to be kept in Redis");
    await first.close();

    const second = await start();
    const page = await open(second.url, "away");
    await until(() => page.finals.length === 3, "the kept finals");
    expect(page.finals.map((entry) => entry.id)).toEqual(["reply-0", "reply-1", "reply-2"]);
    await buses[1]!.publishOutbound(final("away", "reply-3"));
    await until(() => page.finals.length === 4, "the next final");

    // Another gateway, another page of the chat without a token: nothing again.
    const third = await start();
    const fresh = await open(third.url, "away");
    // With the token of the second final: exactly what came after it.
    const resumed = await open(third.url, "away", page.finals[1]!.seq);
    await until(() => resumed.finals.length === 2, "what came after the token");
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(resumed.finals.map((entry) => entry.id)).toEqual(["reply-2", "reply-3"]);
    expect(fresh.finals).toEqual([]);
    expect(page.finals).toHaveLength(4);
    for (const socket of [page, fresh, resumed]) socket.socket.close();
  });
});
