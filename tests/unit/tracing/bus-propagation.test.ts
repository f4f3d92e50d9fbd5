/**
 * W3C trace context crosses the bus: a message published inside a span is claimed with that span's
 * context, the worker's `bus wait` and `turn` spans continue it, and the reply published inside the
 * turn reaches the gateway's consumer carrying the turn's span. Over Redis the two sides are
 * separate bus instances on separate connections (stand-ins for a gateway and a worker process),
 * so the context can only have travelled in the message. With tracing off nothing is carried.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { inTurnSpan } from "../../../src/agent/turn-span.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { InboundMessage, OutboundMessage } from "../../../src/bus/message.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { createRedisBus } from "../../../src/bus/redis-bus.js";
import { inSpan } from "../../../src/tracing.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";
import { type TestTracing, installTestTracing } from "../../support/tracing.js";

interface Sides {
  gateway: MessageBus;
  worker: MessageBus;
  close(): Promise<void>;
}

let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

const buses: Record<string, () => Sides> = {
  memory: () => {
    const bus = createMemoryBus();
    return { gateway: bus, worker: bus, close: () => bus.close() };
  },
  redis: () => {
    const prefix = `countbot-test-${randomUUID()}`;
    const workerRedis = new Redis(redisUrl, { maxRetriesPerRequest: null });
    const gateway = createRedisBus({ redis, prefix });
    const worker = createRedisBus({ redis: workerRedis, prefix });
    return {
      gateway,
      worker,
      async close() {
        await gateway.close();
        await worker.close();
        await workerRedis.quit();
        await deleteKeys(redis, prefix);
      },
    };
  },
};

function inbound(): InboundMessage {
  return { id: randomUUID(), channel: "web", chatId: "ada", senderId: "ada", content: "hello", media: [], mentions: [], receivedAt: Date.now(), metadata: {} };
}

function reply(message: InboundMessage): OutboundMessage {
  return { id: `${message.id}:0`, channel: "web", chatId: "ada", content: "hi", kind: "final", media: [], metadata: {} };
}

/** The next outbound message of the channel, as the gateway's consumer gets it. */
async function nextOutbound(bus: MessageBus): Promise<{ message: OutboundMessage; close(): Promise<void> }> {
  let received!: (message: OutboundMessage) => void;
  const arrived = new Promise<OutboundMessage>((resolve) => (received = resolve));
  const subscription = await bus.consumeOutbound("web", async (event) => {
    if (event.type === "message") received(event.message);
  });
  return { message: await arrived, close: () => subscription.close() };
}

for (const [kind, make] of Object.entries(buses)) {
  describe(`trace context through the ${kind} bus`, () => {
    let sides: Sides;
    let tracing: TestTracing | undefined;
    beforeEach(() => {
      sides = make();
    });
    afterEach(async () => {
      await sides.close();
      await tracing?.uninstall();
      tracing = undefined;
    });

    it("carries the publisher's span to the worker's turn and the turn's span to the reply's consumer", async () => {
      tracing = installTestTracing();
      const message = inbound();
      await inSpan("inbound web", {}, () => sides.gateway.publishInbound(message));
      const [published] = tracing.named("inbound web");
      const publisher = published!.spanContext();

      const claim = (await sides.worker.claimSession({ timeoutMs: 5_000 }))!;
      expect(claim.messages[0]!.id).toBe(message.id);
      expect(claim.messages[0]!.traceContext?.traceparent).toBe(`00-${publisher.traceId}-${publisher.spanId}-01`);
      expect(claim.messages[0]!.traceContext?.sentAt).toBeTypeOf("number");

      const consumed = nextOutbound(sides.gateway);
      await inTurnSpan(claim, Date.now, () => sides.worker.ack(claim, 1, reply(message)));
      const [turn] = tracing.named("turn");
      const [wait] = tracing.named("bus wait");
      for (const span of [turn!, wait!]) {
        expect(span.spanContext().traceId).toBe(publisher.traceId);
        expect(span.parentSpanContext?.spanId).toBe(publisher.spanId);
        expect(span.parentSpanContext?.isRemote).toBe(true);
      }

      const { message: delivered, close } = await consumed;
      await close();
      expect(delivered.traceContext?.traceparent).toBe(`00-${publisher.traceId}-${turn!.spanContext().spanId}-01`);
    });

    it("links the other messages of a coalesced turn to it", async () => {
      tracing = installTestTracing();
      const first = inbound();
      const second = inbound();
      await inSpan("first", {}, () => sides.gateway.publishInbound(first));
      await inSpan("second", {}, () => sides.gateway.publishInbound(second));
      const claim = (await sides.worker.claimSession({ timeoutMs: 5_000 }))!;
      expect(claim.messages.map((message) => message.id)).toEqual([first.id, second.id]);
      await inTurnSpan(claim, Date.now, () => sides.worker.ack(claim));
      const [turn] = tracing.named("turn");
      expect(turn!.spanContext().traceId).toBe(tracing.named("first")[0]!.spanContext().traceId);
      expect(turn!.links.map((link) => link.context.spanId)).toEqual([tracing.named("second")[0]!.spanContext().spanId]);
    });

    it("carries nothing while tracing is off", async () => {
      const message = inbound();
      await inSpan("inbound web", {}, () => sides.gateway.publishInbound(message));
      const claim = (await sides.worker.claimSession({ timeoutMs: 5_000 }))!;
      expect(claim.messages[0]!.traceContext).toBeUndefined();
      const consumed = nextOutbound(sides.gateway);
      await inTurnSpan(claim, Date.now, () => sides.worker.ack(claim, 1, reply(message)));
      const { message: delivered, close } = await consumed;
      await close();
      expect(delivered.traceContext).toBeUndefined();
    });
  });
}
