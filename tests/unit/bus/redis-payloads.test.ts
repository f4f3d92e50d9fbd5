/**
 * Bus payloads parsed where they enter a process (src/bus/payloads.ts): a queued message that does
 * not match the message model is refused with the field it got wrong and handed on as a stand-in
 * in its place (the worker dead-letters it: tests/unit/agent/turn-consumer.test.ts); a damaged
 * outbound entry delivers nothing and is reported; keys the model does not know pass through (a
 * rolling upgrade).
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../../src/bus/message.js";
import { parseInboundPayload, parseStreamEvent } from "../../../src/bus/payloads.js";
import { createRedisBus } from "../../../src/bus/redis-bus.js";
import { busKeys } from "../../../src/bus/redis-keys.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";

const inbound = (id: string, content: string): InboundMessage => ({ id, channel: "web", chatId: "chat-1", senderId: "u", content, media: [], mentions: [], receivedAt: Date.now(), metadata: {} });

describe("bus payloads as they enter a process", () => {
  it("passes a well-formed message through, keys of a newer version included, and names the field a damaged one got wrong", () => {
    const message = { ...inbound("m1", "hello"), addedLater: { by: "a newer gateway" } };
    expect(parseInboundPayload(JSON.stringify(message))).toEqual({ ok: true, value: message });
    const damaged = parseInboundPayload(JSON.stringify({ ...message, senderId: 42 }));
    expect(damaged.ok).toBe(false);
    expect(!damaged.ok && damaged.problem).toMatch(/^senderId: /);
    expect(parseInboundPayload("{not json").ok).toBe(false);
    expect(parseStreamEvent(JSON.stringify({ type: "draft", draft: { replyId: "r", channel: "web", chatId: "c" } })).ok).toBe(true);
    const event = parseStreamEvent(JSON.stringify({ type: "message", message: { id: "o", channel: "web", chatId: "c", content: "x", kind: "shout", media: [], metadata: {} } }));
    expect(!event.ok && event.problem).toMatch(/^message\.kind: /);
  });
});

describe("a damaged payload in Redis", () => {
  let redis: Redis;
  let prefix: string;
  let bus: MessageBus;
  const errors: string[] = [];

  beforeEach(async () => {
    redis = new Redis(redisUrl);
    prefix = `countbot-payloads-${randomUUID()}`;
    errors.length = 0;
    bus = createRedisBus({ redis: new Redis(redisUrl, { maxRetriesPerRequest: null }), prefix, leaseTtlMs: 30_000, redeliveryDelayMs: 20, onError: (error) => errors.push(String(error)) });
  });
  afterEach(async () => {
    await bus.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it("is handed to the worker in its place as a stand-in that says what was wrong, and reported", async () => {
    await bus.publishInbound(inbound("m1", "one"));
    // Written by a process of another version, or damaged: no sender, a number for content.
    const mailbox = busKeys(prefix).mailbox("web:chat-1");
    expect(await redis.llen(mailbox)).toBe(1);
    await redis.lset(mailbox, 0, JSON.stringify({ id: "m1", channel: "web", chatId: "chat-1", content: 7, receivedAt: 1 }));
    await bus.publishInbound(inbound("m2", "two"));
    const [claim] = await bus.claimSessions({ timeoutMs: 2_000, max: 1 });
    expect(claim!.messages.map((message) => [message.id, message.content, message.metadata.refusedPayload])).toEqual([
      ["m1", "", expect.stringMatching(/^senderId: .*; content: /)],
      ["m2", "two", undefined],
    ]);
    expect(errors.some((error) => /a queued message in web:chat-1 was refused: senderId: /.test(error))).toBe(true);
  });

  it("delivers nothing for a damaged outbound entry, reports it, and delivers the next", async () => {
    const delivered: string[] = [];
    const subscription = await bus.consumeOutbound("web", async (event) => {
      if (event.type === "message") delivered.push(event.message.content);
    });
    await redis.xadd(busKeys(prefix).outbound("web"), "*", "event", JSON.stringify({ type: "message", message: { id: "bad", channel: "web" } }));
    await bus.publishOutbound({ id: "good:0", channel: "web", chatId: "chat-1", content: "the next one", kind: "final", media: [], metadata: {} });
    const deadline = Date.now() + 15_000;
    while (delivered.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await subscription.close();
    expect(delivered).toEqual(["the next one"]);
    expect(errors.some((error) => /outbound entry .* refused: message\.chatId: /.test(error))).toBe(true);
  });
});
