/**
 * Leases that live by their worker: a worker's leases hold while it renews its liveness (one
 * command for all of them), and all of them go at once when it stops, to whichever worker claims
 * next. Two buses on one prefix play two worker processes; the clock is moved by hand.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../../src/bus/message.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { createRedisBus } from "../../../src/bus/redis-bus.js";
import { busKeys } from "../../../src/bus/redis-keys.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";
import { manualClock } from "../../conformance/bus.suite.js";

const TTL_MS = 1_000;
let redis: Redis;
let prefix: string;
let clock: ReturnType<typeof manualClock>;
let buses: MessageBus[];

function worker(): MessageBus {
  const bus = createRedisBus({ redis, prefix, leaseTtlMs: TTL_MS, now: clock.now });
  buses.push(bus);
  return bus;
}

function inbound(chatId: string, content: string): InboundMessage {
  return { id: randomUUID(), channel: "test", chatId, senderId: "u", content, media: [], mentions: [], receivedAt: Date.now(), metadata: {} };
}

beforeEach(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  prefix = `countbot-liveness-${randomUUID()}`;
  clock = manualClock();
  buses = [];
});

afterEach(async () => {
  await Promise.all(buses.map((bus) => bus.close()));
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe("leases that live by their worker", () => {
  it("hands every session of a worker that stopped renewing to the next claimer, and leaves a living worker's alone", async () => {
    const dying = worker();
    const living = worker();
    for (const chat of ["a", "b", "c"]) await dying.publishInbound(inbound(chat, `to ${chat}`));
    const lost = await dying.claimSessions({ max: 2, timeoutMs: 1_000 });
    const kept = (await living.claimSession({ timeoutMs: 1_000 }))!;
    expect(lost.map((claim) => claim.sessionKey)).toEqual(["test:a", "test:b"]);

    clock.advance(700);
    expect(await living.renew(kept)).toBe(true);
    clock.advance(700); // the dying worker's liveness ran out 400 ms ago; the living one's runs to 1,700
    const taken = await living.claimSessions({ max: 10, timeoutMs: 1_000 });
    expect(taken.map((claim) => claim.sessionKey).sort()).toEqual(["test:a", "test:b"]);
    expect(taken.map((claim) => claim.messages[0]!.content).sort()).toEqual(["to a", "to b"]);
    expect(Math.min(...taken.map((claim) => claim.token))).toBeGreaterThan(Math.max(...lost.map((claim) => claim.token)));
    expect(await living.holds(kept)).toBe(true);
    for (const claim of lost) {
      expect(await dying.holds(claim)).toBe(false);
      await expect(dying.ack(claim)).rejects.toMatchObject({ code: "lease-lost" });
    }
  });

  it("keeps a worker's leases in one entry: renewing it keeps them all, however many", async () => {
    const bus = worker();
    for (const chat of ["a", "b", "c", "d"]) await bus.publishInbound(inbound(chat, "hi"));
    const claims = await bus.claimSessions({ max: 4, timeoutMs: 1_000 });
    const keys = busKeys(prefix);
    expect(await redis.zcard(keys.workers)).toBe(1);
    expect(Object.values(await redis.hgetall(keys.own)).map((lease) => lease.split(":")[1])).toEqual(Array(4).fill((await redis.zrange(keys.workers, 0, 0))[0]));
    for (let step = 0; step < 5; step += 1) {
      clock.advance(600);
      expect(await bus.renew(claims[step % 4]!)).toBe(true);
    }
    for (const claim of claims) expect(await bus.holds(claim)).toBe(true);
    expect(await bus.claimSession({ timeoutMs: 0 })).toBeNull();
  });

  it("a worker whose liveness ran out learns it at its next renewal, loses every lease, and claims again under a new id", async () => {
    const bus = worker();
    await bus.publishInbound(inbound("a", "one"));
    const stale = (await bus.claimSession({ timeoutMs: 1_000 }))!;
    const keys = busKeys(prefix);
    const [firstId] = await redis.zrange(keys.workers, 0, 0);
    clock.advance(1_500); // stalled past its TTL, nobody reaped it yet
    expect(await bus.renew(stale)).toBe(false);
    expect(await bus.holds(stale)).toBe(false);
    const again = (await bus.claimSession({ timeoutMs: 1_000 }))!;
    expect(again.sessionKey).toBe("test:a");
    expect(again.token).toBeGreaterThan(stale.token);
    expect(await redis.zrange(keys.workers, 0, -1)).not.toContain(firstId);
    expect(await bus.renew(again)).toBe(true);
    await bus.ack(again);
    expect(await redis.hlen(keys.own)).toBe(0);
  });

  it("queues a message for a leased session without making it ready: the ack does, once the turn is over", async () => {
    const bus = worker();
    await bus.publishInbound(inbound("a", "one"));
    const claim = (await bus.claimSession({ timeoutMs: 1_000 }))!;
    await bus.publishInbound(inbound("a", "two"));
    expect(await redis.zcard(busKeys(prefix).ready)).toBe(0);
    await bus.ack(claim);
    const next = (await bus.claimSession({ timeoutMs: 1_000 }))!;
    expect(next.messages.map((message) => message.content)).toEqual(["two"]);
  });
});
