/**
 * Fan-out between gateways only where it is needed: two web gateways on one bus (the memory bus
 * hands a channel's replies to the gateway that attached last), a page open on the other one.
 */
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { WebEvent } from "../../../channels/web/web-adapter.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { type ChatEventLog, createMemoryChatEventLog } from "../../../src/store/chat-event-log.js";
import { startWebGateway } from "../../support/web-gateway.js";

const TOKEN = "web-peers-token";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A memory bus that records every broadcast's payload. */
function countingBus(): { bus: MessageBus; broadcasts: Array<Record<string, unknown>> } {
  const bus = createMemoryBus();
  cleanups.push(() => bus.close());
  const broadcasts: Array<Record<string, unknown>> = [];
  const broadcast = bus.broadcast.bind(bus);
  bus.broadcast = async (topic, payload) => {
    broadcasts.push(JSON.parse(payload) as Record<string, unknown>);
    await broadcast(topic, payload);
  };
  return { bus, broadcasts };
}

async function gateway(bus: MessageBus, events: ChatEventLog = createMemoryChatEventLog()) {
  const started = await startWebGateway({ bus, token: TOKEN, pingIntervalMs: 0, events });
  cleanups.push(() => started.close());
  return started;
}

async function page(url: string, chatId: string): Promise<WebEvent[]> {
  const socket = new WebSocket(`${url.replace("http", "ws")}/ws?chatId=${chatId}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const events: WebEvent[] = [];
  socket.on("message", (data: Buffer) => events.push(JSON.parse(data.toString("utf8")) as WebEvent));
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  cleanups.push(async () => void socket.terminate());
  return events;
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const final = (chatId: string, id: string) => ({ id, channel: "web", chatId, content: `reply ${id}`, kind: "final" as const, media: [], metadata: { answers: [] } });
const fannedOut = (broadcasts: Array<Record<string, unknown>>) => broadcasts.filter((message) => message.event !== undefined);

describe("web fan-out between gateways", () => {
  it("fans nothing out when one gateway holds every page", async () => {
    const { bus, broadcasts } = countingBus();
    const only = await gateway(bus);
    const events = await page(only.url, "chat-1");
    await bus.publishDraft({ replyId: "r1", channel: "web", chatId: "chat-1", text: "Hel" });
    await bus.publishOutbound(final("chat-1", "r1"));
    await until(() => events.some((event) => event.type === "message"), "the final on the page");
    expect(events.map((event) => event.type)).toEqual(["draft", "message"]);
    expect(fannedOut(broadcasts)).toEqual([]);
  });

  it("fans a chat's events out to the gateway holding its page, and only that chat's", async () => {
    const { bus, broadcasts } = countingBus();
    // One log for both, as Redis is when scaled out.
    const log = createMemoryChatEventLog();
    const holder = await gateway(bus, log);
    await gateway(bus, log); // attached last: the memory bus hands it the replies
    const events = await page(holder.url, "chat-held");
    await until(() => broadcasts.some((message) => message.peer === "attach" && message.chatId === "chat-held"), "the news of the page");
    await bus.publishDraft({ replyId: "r2", channel: "web", chatId: "chat-held", text: "Hel" });
    await bus.publishOutbound(final("chat-held", "r2"));
    await until(() => events.some((event) => event.type === "message"), "the final on the other gateway's page");
    expect(events.map((event) => event.type)).toEqual(["draft", "message"]);

    await bus.publishOutbound(final("chat-nobody-watches", "r3"));
    await until(async () => (await log.since("chat-nobody-watches", "0-0")).events.length === 1, "the unwatched chat's final kept");
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(fannedOut(broadcasts).map((message) => message.chatId)).toEqual(["chat-held", "chat-held"]);
  });
});
