/** The in-process bus holds a bounded number of messages: past it, publishing refuses and stores nothing. */
import { afterEach, describe, expect, it } from "vitest";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { InboundMessage, OutboundMessage } from "../../../src/bus/message.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { BusError } from "../../../src/errors.js";

let bus: MessageBus | undefined;
afterEach(async () => {
  await bus?.close();
  bus = undefined;
});

function inbound(id: string, chatId: string, platformEventId?: string): InboundMessage {
  return { id, channel: "web", chatId, senderId: "u", content: id, media: [], mentions: [], receivedAt: 1, chatType: "private", metadata: {}, ...(platformEventId ? { platformEventId } : {}) };
}

async function refusal(promise: Promise<unknown>): Promise<BusError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(BusError);
  return error as BusError;
}

describe("memory bus capacity", () => {
  it("refuses the message past maxQueued with BusError unavailable naming the setting, counting messages still in a turn", async () => {
    bus = createMemoryBus({ maxQueued: 3 });
    await bus.publishInbound(inbound("m1", "a"));
    await bus.publishInbound(inbound("m2", "a"));
    const claim = await bus.claimSession({ timeoutMs: 0 });
    expect(claim?.messages.map((message) => message.id)).toEqual(["m1", "m2"]);
    await bus.publishInbound(inbound("m3", "b"));
    const error = await refusal(bus.publishInbound(inbound("m4", "c")));
    expect(error.code).toBe("unavailable");
    expect(error.message).toContain("agent.maxQueuedMessages");
    expect(error.message).toContain("nothing was stored");

    // Part of the claim consumed: that much room, no more.
    await bus.ack(claim!, 1);
    await bus.publishInbound(inbound("m4", "c"));
    await refusal(bus.publishInbound(inbound("m5", "c")));
    expect((await bus.stats()).ready).toBe(3);
  });

  it("does not mark a refused platform event as seen: sent again once there is room, it is queued", async () => {
    bus = createMemoryBus({ maxQueued: 1 });
    await bus.publishInbound(inbound("m1", "a", "event-1"));
    await refusal(bus.publishInbound(inbound("m2", "b", "event-2")));
    const claim = await bus.claimSession({ timeoutMs: 0 });
    await bus.ack(claim!);
    expect(await bus.publishInbound(inbound("m2", "b", "event-2"))).toEqual({ accepted: true });
    // A redelivery is a duplicate whether or not there is room.
    expect(await bus.publishInbound(inbound("m1-again", "a", "event-1"))).toEqual({ accepted: false });
  });
});

describe("memory bus capacity: replies not yet delivered", () => {
  function reply(id: string, chatId: string): OutboundMessage {
    return { id: `reply-${id}`, channel: "web", chatId, content: `answer to ${id}`, kind: "final", media: [], metadata: {} };
  }

  async function answer(id: string, chatId: string): Promise<void> {
    await bus!.publishInbound(inbound(id, chatId));
    const claim = await bus!.claimSession({ timeoutMs: 0 });
    await bus!.ack(claim!, undefined, reply(id, chatId));
  }

  it("counts them against maxQueued: while the platform is down new messages are refused, once it delivers there is room", async () => {
    bus = createMemoryBus({ maxQueued: 2, redeliveryDelayMs: 1 });
    let down = true;
    const delivered: string[] = [];
    await bus.consumeOutbound("web", async (event) => {
      if (down) throw new Error("platform down");
      if (event.type === "message") delivered.push(event.message.id);
    });
    await answer("m1", "a");
    await answer("m2", "b");
    const error = await refusal(bus.publishInbound(inbound("m3", "c")));
    expect(error.code).toBe("unavailable");
    expect(error.message).toContain("2 replies not yet delivered");

    down = false;
    for (let waited = 0; delivered.length < 2 && waited < 200; waited += 1) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(delivered.sort()).toEqual(["reply-m1", "reply-m2"]);
    expect(await bus.publishInbound(inbound("m3", "c"))).toEqual({ accepted: true });
    expect(await bus.publishInbound(inbound("m4", "d"))).toEqual({ accepted: true });
    await refusal(bus.publishInbound(inbound("m5", "e")));
  });

  it("leaves out the replies of a channel nobody consumes here: they wait for nobody", async () => {
    bus = createMemoryBus({ maxQueued: 2 });
    await answer("m1", "a");
    await answer("m2", "b");
    expect(await bus.publishInbound(inbound("m3", "c"))).toEqual({ accepted: true });
    expect(await bus.publishInbound(inbound("m4", "d"))).toEqual({ accepted: true });
    await refusal(bus.publishInbound(inbound("m5", "e")));
  });

  it("never refuses a turn's reply itself: the bound is applied where a message comes in", async () => {
    bus = createMemoryBus({ maxQueued: 1, redeliveryDelayMs: 1 });
    let down = true;
    const events: string[] = [];
    await bus.consumeOutbound("web", async (event) => {
      if (down) throw new Error("platform down");
      if (event.type === "message") events.push(event.message.id);
    });
    await answer("m1", "a");
    await refusal(bus.publishInbound(inbound("m2", "b")));
    // A reply published outside a turn (a job's) is still taken, and counted.
    await bus.publishOutbound(reply("job", "a"));
    down = false;
    for (let waited = 0; events.length < 2 && waited < 200; waited += 1) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(events).toEqual(["reply-m1", "reply-job"]);
    expect(await bus.publishInbound(inbound("m2", "b"))).toEqual({ accepted: true });
  });
});
