/**
 * The MessageBus conformance suite: every bus implementation runs it. The guarantees:
 * per-session order, one lease per session, sessions in parallel, burst coalescing, lease expiry
 * and takeover with fencing, inbound and outbound dedupe, ordered outbound delivery.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InboundMessage, OutboundMessage } from "../../src/bus/message.js";
import { type BusOptions, DRAFT_AUDIENCE_TTL_MS, type MessageBus, type OutboundEvent } from "../../src/bus/message-bus.js";
import { BusError } from "../../src/errors.js";

export interface BusFactory {
  (options: BusOptions): Promise<{ bus: MessageBus; cleanup: () => Promise<void> }>;
}

/** A clock the test moves by hand. */
export function manualClock(start = 1_700_000_000_000) {
  let current = start;
  return {
    now: () => current,
    advance(ms: number) {
      current += ms;
    },
  };
}

let counter = 0;
export function inbound(chatId: string, content: string, extra: Partial<InboundMessage> = {}): InboundMessage {
  counter += 1;
  return {
    id: `in-${counter}-${Math.random().toString(36).slice(2, 8)}`,
    channel: "test",
    chatId,
    senderId: "user-1",
    content,
    media: [],
    mentions: [],
    receivedAt: Date.now(),
    metadata: {},
    ...extra,
  };
}

export function outbound(chatId: string, content: string, id = `out-${content}`): OutboundMessage {
  return { id, channel: "test", chatId, content, kind: "final", media: [], metadata: {} };
}

async function waitFor<T>(probe: () => T | undefined, what: string, limitMs = 5_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    const value = probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export function runBusSuite(name: string, factory: BusFactory): void {
  describe(`MessageBus conformance: ${name}`, () => {
    let clock: ReturnType<typeof manualClock>;
    let bus: MessageBus;
    let cleanup: () => Promise<void>;

    async function open(options: BusOptions = {}): Promise<MessageBus> {
      const made = await factory({ leaseTtlMs: 30_000, now: clock.now, ...options });
      bus = made.bus;
      cleanup = made.cleanup;
      return bus;
    }

    beforeEach(() => {
      clock = manualClock();
    });
    afterEach(async () => {
      await cleanup?.();
    });

    it("keeps a session's messages in order and hands a burst over as one claim", async () => {
      await open();
      for (const text of ["one", "two", "three", "four", "five"]) await bus.publishInbound(inbound("a", text));
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      expect(claim?.sessionKey).toBe("test:a");
      expect(claim?.messages.map((message) => message.content)).toEqual(["one", "two", "three", "four", "five"]);
      await bus.ack(claim!);
      expect(await bus.claimSession({ timeoutMs: 0 })).toBeNull();
    });

    it("leases a session to one claimer; messages arriving mid-turn become the next turn", async () => {
      await open();
      await bus.publishInbound(inbound("a", "first"));
      const first = await bus.claimSession({ timeoutMs: 1_000 });
      await bus.publishInbound(inbound("a", "second"));
      await bus.publishInbound(inbound("a", "third"));
      expect(await bus.claimSession({ timeoutMs: 0 })).toBeNull();
      await bus.ack(first!);
      const next = await bus.claimSession({ timeoutMs: 1_000 });
      expect(next?.messages.map((message) => message.content)).toEqual(["second", "third"]);
      expect(next!.token).toBeGreaterThan(first!.token);
    });

    it("runs different sessions in parallel", async () => {
      await open();
      await bus.publishInbound(inbound("a", "for a"));
      await bus.publishInbound(inbound("b", "for b"));
      const one = await bus.claimSession({ timeoutMs: 1_000 });
      const two = await bus.claimSession({ timeoutMs: 1_000 });
      expect(new Set([one?.sessionKey, two?.sessionKey])).toEqual(new Set(["test:a", "test:b"]));
    });

    it("serves sessions oldest first", async () => {
      await open();
      for (const chat of ["c1", "c2", "c3"]) {
        await bus.publishInbound(inbound(chat, chat));
        clock.advance(1);
      }
      const order: string[] = [];
      for (let index = 0; index < 3; index += 1) order.push((await bus.claimSession({ timeoutMs: 1_000 }))!.sessionKey);
      expect(order).toEqual(["test:c1", "test:c2", "test:c3"]);
    });

    it("claims several ready sessions at once, oldest first, each with a lease of its own", async () => {
      await open();
      await bus.publishInbound(inbound("a", "a1"));
      clock.advance(1);
      await bus.publishInbound(inbound("b", "b1"));
      await bus.publishInbound(inbound("a", "a2"));
      clock.advance(1);
      await bus.publishInbound(inbound("c", "c1"));
      const claims = await bus.claimSessions({ timeoutMs: 1_000, max: 2 });
      expect(claims.map((claim) => claim.sessionKey)).toEqual(["test:a", "test:b"]);
      expect(claims[0]!.messages.map((message) => message.content)).toEqual(["a1", "a2"]);
      // A lease of its own: a token fences its session (a partitioned bus's partitions count
      // tokens apart, so two sessions may share a number), and acking one leaves the other held.
      for (const claim of claims) expect(await bus.holds(claim)).toBe(true);
      const rest = await bus.claimSessions({ timeoutMs: 1_000, max: 10 });
      expect(rest.map((claim) => claim.sessionKey)).toEqual(["test:c"]);
      expect(await bus.claimSessions({ timeoutMs: 0, max: 10 })).toEqual([]);
      await bus.ack(claims[1]!);
      expect(await bus.holds(claims[0]!)).toBe(true);
    });

    it("wakes a waiting claimer when a message is published", async () => {
      await open();
      const waiting = bus.claimSession({ timeoutMs: 5_000 });
      await bus.publishInbound(inbound("a", "hello"));
      expect((await waiting)?.messages[0]?.content).toBe("hello");
    });

    it("returns null when a wait is aborted", async () => {
      await open();
      const controller = new AbortController();
      const waiting = bus.claimSession({ timeoutMs: 10_000, signal: controller.signal });
      controller.abort();
      expect(await waiting).toBeNull();
    });

    it("holds a debounced session back until the window has passed", async () => {
      await open({ debounceMs: 1_000 });
      await bus.publishInbound(inbound("a", "one"));
      clock.advance(500);
      await bus.publishInbound(inbound("a", "two"));
      expect(await bus.claimSession({ timeoutMs: 0 })).toBeNull();
      clock.advance(1_001);
      const claim = await bus.claimSession({ timeoutMs: 0 });
      expect(claim?.messages.map((message) => message.content)).toEqual(["one", "two"]);
    });

    it("acks only what was consumed; the rest is claimed again", async () => {
      await open();
      for (const text of ["one", "two", "three"]) await bus.publishInbound(inbound("a", text));
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      await bus.ack(claim!, 1);
      const again = await bus.claimSession({ timeoutMs: 1_000 });
      expect(again?.messages.map((message) => message.content)).toEqual(["two", "three"]);
    });

    it("release gives the same messages back with a newer token", async () => {
      await open();
      await bus.publishInbound(inbound("a", "one"));
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      await bus.release(claim!);
      const again = await bus.claimSession({ timeoutMs: 1_000 });
      expect(again?.messages.map((message) => message.content)).toEqual(["one"]);
      expect(again!.token).toBeGreaterThan(claim!.token);
    });

    it("takes over an expired lease and fences the old holder out", async () => {
      await open({ leaseTtlMs: 1_000 });
      await bus.publishInbound(inbound("a", "one"));
      const zombie = await bus.claimSession({ timeoutMs: 1_000 });
      expect(await bus.renew(zombie!)).toBe(true);
      clock.advance(1_500);
      const successor = await bus.claimSession({ timeoutMs: 1_000 });
      expect(successor?.sessionKey).toBe("test:a");
      expect(successor?.messages.map((message) => message.content)).toEqual(["one"]);
      expect(successor!.token).toBeGreaterThan(zombie!.token);

      expect(await bus.holds(zombie!)).toBe(false);
      expect(await bus.renew(zombie!)).toBe(false);
      await expect(bus.publishOutbound(outbound("a", "stale"), zombie!)).rejects.toBeInstanceOf(BusError);
      await expect(bus.ack(zombie!)).rejects.toMatchObject({ code: "lease-lost" });
      expect(await bus.holds(successor!)).toBe(true);

      const seen: OutboundEvent[] = [];
      const subscription = await bus.consumeOutbound("test", async (event) => {
        seen.push(event);
      });
      await bus.publishOutbound(outbound("a", "fresh"), successor!);
      await waitFor(() => (seen.length > 0 ? true : undefined), "the successor's reply");
      expect(seen.map((event) => (event.type === "message" ? event.message.content : "draft"))).toEqual(["fresh"]);
      await subscription.close();
      await bus.ack(successor!);
      expect(await bus.claimSession({ timeoutMs: 0 })).toBeNull();
    });

    it("keeps a renewed lease alive past its first expiry", async () => {
      await open({ leaseTtlMs: 1_000 });
      await bus.publishInbound(inbound("a", "one"));
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      clock.advance(700);
      expect(await bus.renew(claim!)).toBe(true);
      clock.advance(700);
      expect(await bus.claimSession({ timeoutMs: 0 })).toBeNull();
      expect(await bus.holds(claim!)).toBe(true);
    });

    it("drops a redelivered platform event", async () => {
      await open();
      const first = await bus.publishInbound(inbound("a", "hi", { platformEventId: "update-7" }));
      const second = await bus.publishInbound(inbound("a", "hi", { platformEventId: "update-7" }));
      expect(first.accepted).toBe(true);
      expect(second.accepted).toBe(false);
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      expect(claim?.messages).toHaveLength(1);
    });

    it("remembers a platform event answered without a publish, per channel, as publishing it would", async () => {
      await open();
      // A gateway answers /stop itself: the event must count as seen by every gateway, and by a publish.
      expect(await bus.markEventSeen("test", "update-9", "a")).toBe(true);
      expect(await bus.markEventSeen("test", "update-9", "a")).toBe(false);
      expect(await bus.markEventSeen("other", "update-9", "a")).toBe(true);
      expect((await bus.publishInbound(inbound("a", "hi", { platformEventId: "update-9" }))).accepted).toBe(false);
      expect((await bus.publishInbound(inbound("a", "hi", { platformEventId: "update-10" }))).accepted).toBe(true);
      expect(await bus.markEventSeen("test", "update-10", "a")).toBe(false);
    });

    it("files a system message under the session it names", async () => {
      await open();
      await bus.publishInbound(inbound("a", "user text"));
      await bus.publishInbound({ ...inbound("test:a", "subagent done"), channel: "system" });
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      expect(claim?.sessionKey).toBe("test:a");
      expect(claim?.messages.map((message) => message.content)).toEqual(["user text", "subagent done"]);
    });

    it("marks an outbound id delivered once", async () => {
      await open();
      expect(await bus.isDelivered("reply-1:0")).toBe(false);
      expect(await bus.markDelivered("reply-1:0")).toBe(true);
      expect(await bus.isDelivered("reply-1:0")).toBe(true);
      expect(await bus.markDelivered("reply-1:0")).toBe(false);
      expect(await bus.markDelivered("reply-1:1")).toBe(true);
    });

    it("remembers which platform message shows a reply's draft, per channel", async () => {
      await open();
      expect(await bus.draftMessageOf("test", "reply-d")).toBeUndefined();
      await bus.recordDraftMessage("test", "reply-d", "m-17");
      expect(await bus.draftMessageOf("test", "reply-d")).toBe("m-17");
      expect(await bus.draftMessageOf("other", "reply-d")).toBeUndefined();
      expect(await bus.draftMessageOf("test", "reply-e")).toBeUndefined();
    });

    it("delivers a channel's outbound messages in order, drafts before their final and never after", async () => {
      await open();
      await bus.watchDrafts("test");
      const seen: string[] = [];
      const subscription = await bus.consumeOutbound("test", async (event) => {
        seen.push(event.type === "message" ? `final:${event.message.content}` : `draft:${event.draft.text}`);
      });
      await bus.publishDraft({ replyId: "r1", channel: "test", chatId: "a", text: "Hel" });
      await bus.publishDraft({ replyId: "r1", channel: "test", chatId: "a", text: "Hello" });
      for (let index = 0; index < 10; index += 1) await bus.publishOutbound(outbound("a", String(index), `r${index}`));
      await bus.publishDraft({ replyId: "r1", channel: "test", chatId: "a", text: "Hello late" });
      await waitFor(() => (seen.filter((line) => line.startsWith("final")).length === 10 ? true : undefined), "ten finals");
      await subscription.close();
      const finals = seen.filter((line) => line.startsWith("final"));
      expect(finals).toEqual(Array.from({ length: 10 }, (_, index) => `final:${index}`));
      const drafts = seen.filter((line) => line.startsWith("draft"));
      expect(drafts.length).toBeGreaterThan(0);
      expect(drafts.at(-1)).not.toBe("draft:Hello late");
      expect(seen.indexOf("final:1")).toBeGreaterThan(seen.indexOf(drafts[0]!));
    });

    it("hands different chats over concurrently, one event at a time per chat", async () => {
      await open();
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const seen: string[] = [];
      const subscription = await bus.consumeOutbound("test", async (event) => {
        if (event.type !== "message") return;
        seen.push(event.message.content);
        // Chat a's first reply is slow (pacing, a rate limit): it must not hold up chat b.
        if (event.message.content === "a1") await held;
      });
      await bus.publishOutbound(outbound("a", "a1"));
      await bus.publishOutbound(outbound("a", "a2"));
      await bus.publishOutbound(outbound("b", "b1"));
      await waitFor(() => (seen.includes("b1") ? true : undefined), "chat b's reply while chat a's is held");
      expect(seen).not.toContain("a2");
      release();
      await waitFor(() => (seen.includes("a2") ? true : undefined), "chat a's second reply");
      await subscription.close();
      expect(seen.filter((content) => content.startsWith("a"))).toEqual(["a1", "a2"]);
    });

    it("tells the handler how many replies of the chat wait behind the one it hands over (drafts not counted), and when each was published", async () => {
      await open();
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const behind: Array<[string, number | undefined]> = [];
      const publishedAt = new Map<string, number>();
      const started = Date.now();
      const subscription = await bus.consumeOutbound("test", async (event, context) => {
        if (event.type !== "message") return;
        behind.push([event.message.content, context?.behind]);
        publishedAt.set(event.message.content, context?.publishedAt ?? Number.NaN);
        if (event.message.content === "a1") await held;
      });
      await bus.publishOutbound(outbound("a", "a1"));
      await waitFor(() => (behind.length > 0 ? true : undefined), "chat a's first reply");
      await bus.publishOutbound(outbound("a", "a2"));
      await bus.publishDraft({ replyId: "out-a4", channel: "test", chatId: "a", text: "a4 so far" });
      await bus.publishOutbound(outbound("a", "a3"));
      await bus.publishOutbound(outbound("b", "b1"));
      await waitFor(() => (behind.some(([content]) => content === "b1") ? true : undefined), "chat b's reply");
      release();
      await waitFor(() => (behind.some(([content]) => content === "a3") ? true : undefined), "chat a's last reply");
      await subscription.close();
      expect(behind.filter(([content]) => content.startsWith("a"))).toEqual([
        ["a1", 0],
        ["a2", 1],
        ["a3", 0],
      ]);
      expect(behind.find(([content]) => content === "b1")).toEqual(["b1", 0]);
      // In publish order (a1 before a2 before a3; b1 not before them, though another chat may share
      // a3's millisecond), on the same clock as the test's, give or take.
      const times = ["a1", "a2", "a3", "b1"].map((content) => publishedAt.get(content)!);
      expect(times[0]).toBeLessThan(times[1]!);
      expect(times[1]).toBeLessThan(times[2]!);
      expect(Math.floor(times[3]!)).toBeGreaterThanOrEqual(Math.floor(times[2]!));
      expect(Math.abs(times[0]! - started)).toBeLessThan(60_000);
    });

    it("redelivers an outbound message whose handler failed", async () => {
      await open();
      let attempts = 0;
      const delivered: string[] = [];
      const subscription = await bus.consumeOutbound("test", async (event) => {
        if (event.type !== "message") return;
        attempts += 1;
        if (attempts === 1) throw new Error("platform said 502");
        delivered.push(event.message.content);
      });
      await bus.publishOutbound(outbound("a", "important"));
      await waitFor(() => (delivered.length > 0 ? true : undefined), "the redelivery");
      await subscription.close();
      expect(delivered).toEqual(["important"]);
      expect(attempts).toBe(2);
    });

    it("tells every listener when a session's turn is to be cancelled", async () => {
      await open();
      const heard: string[] = [];
      const subscription = await bus.onCancel((sessionKey) => heard.push(sessionKey));
      await bus.requestCancel("test:a");
      await waitFor(() => (heard.length > 0 ? true : undefined), "the cancel");
      await subscription.close();
      expect(heard).toEqual(["test:a"]);
    });

    it("counts the claims of a batch, so a batch whose holder keeps dying is recognized", async () => {
      await open({ leaseTtlMs: 1_000 });
      await bus.publishInbound(inbound("a", "poison"));
      const first = await bus.claimSession({ timeoutMs: 1_000 });
      expect(first?.attempt).toBe(1);
      clock.advance(1_500);
      const second = await bus.claimSession({ timeoutMs: 1_000 });
      expect(second?.attempt).toBe(2);
      await bus.release(second!);
      const third = await bus.claimSession({ timeoutMs: 1_000 });
      expect(third?.attempt).toBe(3);
      await bus.deadLetter(third!, "crashed its worker 3 times");
      expect(await bus.claimSession({ timeoutMs: 0 })).toBeNull();
      const [letter] = await bus.deadLetters();
      expect(letter).toMatchObject({ sessionKey: "test:a", reason: "crashed its worker 3 times" });
      expect(letter!.messages.map((message) => message.content)).toEqual(["poison"]);
      await bus.publishInbound(inbound("a", "healthy"));
      const next = await bus.claimSession({ timeoutMs: 1_000 });
      expect(next).toMatchObject({ attempt: 1, messages: [expect.objectContaining({ content: "healthy" })] });
    });

    it("counts ready and leased sessions and dead letters", async () => {
      await open({ leaseTtlMs: 1_000 });
      expect(await bus.stats()).toEqual({ ready: 0, leased: 0, deadLetters: 0 });
      await bus.publishInbound(inbound("a", "one"));
      await bus.publishInbound(inbound("b", "two"));
      await bus.publishInbound(inbound("b", "three"));
      expect(await bus.stats()).toEqual({ ready: 2, leased: 0, deadLetters: 0 });
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      expect(await bus.stats()).toEqual({ ready: 1, leased: 1, deadLetters: 0 });
      await bus.deadLetter(claim!, "for the count");
      expect(await bus.stats()).toEqual({ ready: 1, leased: 0, deadLetters: 1 });
      const other = await bus.claimSession({ timeoutMs: 1_000 });
      clock.advance(1_500); // its holder went quiet: the lease no longer counts
      expect((await bus.stats()).leased).toBe(0);
      expect(other).not.toBeNull();
    });

    it("fans a broadcast out to its listeners", async () => {
      await open();
      const heard: string[] = [];
      const subscription = await bus.onBroadcast("web", (payload) => heard.push(payload));
      await bus.broadcast("web", "hello everyone");
      await bus.broadcast("other-topic", "not for this listener");
      await waitFor(() => (heard.length > 0 ? true : undefined), "the broadcast");
      await subscription.close();
      expect(heard).toEqual(["hello everyone"]);
    });

    it("rejects an ack of a claim that was already acked", async () => {
      await open();
      await bus.publishInbound(inbound("a", "one"));
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      await bus.ack(claim!);
      await expect(bus.ack(claim!)).rejects.toBeInstanceOf(BusError);
    });

    it("publishes drafts only where someone watches: a channel's every chat, or one chat", async () => {
      await open();
      const seen: string[] = [];
      const subscription = await bus.consumeOutbound("test", async (event) => {
        if (event.type === "draft") seen.push(`${event.draft.chatId}:${event.draft.text}`);
      });
      const draft = (chatId: string, text: string) => bus.publishDraft({ replyId: `r-${chatId}`, channel: "test", chatId, text });
      expect(await draft("a", "nobody watches")).toBe(false);

      const watchingA = await bus.watchDrafts("test", "a");
      expect(await draft("a", "a is watched")).toBe(true);
      expect(await draft("b", "b is not")).toBe(false);
      await waitFor(() => (seen.length > 0 ? true : undefined), "chat a's draft");

      const everyChat = await bus.watchDrafts("test");
      expect(await draft("b", "every chat now")).toBe(true);
      await waitFor(() => (seen.length > 1 ? true : undefined), "chat b's draft");
      await everyChat.close();
      await watchingA.close();
      // A closed declaration may outlive its close by the audience TTL, never longer.
      clock.advance(DRAFT_AUDIENCE_TTL_MS + 1);
      expect(await draft("a", "after the page left")).toBe(false);
      expect(await draft("b", "after the connector left")).toBe(false);
      await subscription.close();
      expect(seen).toEqual(["a:a is watched", "b:every chat now"]);
    });

    it("publishes a turn's reply with its ack, and what arrived mid-turn is the next turn", async () => {
      await open();
      const seen: string[] = [];
      const subscription = await bus.consumeOutbound("test", async (event) => {
        if (event.type === "message") seen.push(event.message.content);
      });
      await bus.publishInbound(inbound("a", "one"));
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      await bus.publishInbound(inbound("a", "two"));
      await bus.ack(claim!, 1, outbound("a", "reply to one", "reply-1"));
      await waitFor(() => (seen.length > 0 ? true : undefined), "the reply");
      await subscription.close();
      expect(seen).toEqual(["reply to one"]);
      const next = await bus.claimSession({ timeoutMs: 1_000 });
      expect(next?.messages.map((message) => message.content)).toEqual(["two"]);
      expect(await bus.holds(claim!)).toBe(false);
    });

    it("publishes nothing with the ack of a claim whose lease was taken over", async () => {
      await open({ leaseTtlMs: 1_000 });
      const seen: string[] = [];
      const subscription = await bus.consumeOutbound("test", async (event) => {
        if (event.type === "message") seen.push(event.message.content);
      });
      await bus.publishInbound(inbound("a", "one"));
      const zombie = await bus.claimSession({ timeoutMs: 1_000 });
      clock.advance(1_500);
      const successor = await bus.claimSession({ timeoutMs: 1_000 });
      await expect(bus.ack(zombie!, 1, outbound("a", "stale", "stale-reply"))).rejects.toMatchObject({ code: "lease-lost" });
      await bus.ack(successor!, 1, outbound("a", "fresh", "fresh-reply"));
      await waitFor(() => (seen.length > 0 ? true : undefined), "the successor's reply");
      await subscription.close();
      expect(seen).toEqual(["fresh"]);
      expect(await bus.claimSession({ timeoutMs: 0 })).toBeNull();
    });
  });
}
