/**
 * The ChatEventLog conformance suite: the in-process log and the Redis one run it unchanged. Each
 * `open` is a log over the same storage (another gateway, for Redis; the same process's, in memory).
 */
import { afterEach, describe, expect, it } from "vitest";
import { type ChatEventLog, EVENT_ID_PATTERN, compareEventIds } from "../../src/store/chat-event-log.js";

export interface ChatEventLogHarness {
  open(options?: { maxPerChat?: number }): Promise<ChatEventLog>;
  cleanup(): Promise<void>;
}

const payloads = (read: { events: Array<{ payload: string }> }) => read.events.map((event) => event.payload);

export function runChatEventLogSuite(name: string, makeHarness: () => Promise<ChatEventLogHarness>): void {
  describe(`ChatEventLog conformance: ${name}`, () => {
    const harnesses: ChatEventLogHarness[] = [];
    const start = async () => {
      const harness = await makeHarness();
      harnesses.push(harness);
      return harness;
    };
    afterEach(async () => {
      for (const harness of harnesses.splice(0)) await harness.cleanup();
    });

    it("hands out growing ids and returns what came after one, oldest first", async () => {
      const log = await (await start()).open();
      const ids: string[] = [];
      for (const payload of ["a", "b", "c"]) ids.push((await log.append("chat-1", payload)).id);
      for (const id of ids) expect(id).toMatch(EVENT_ID_PATTERN);
      expect(compareEventIds(ids[0]!, ids[1]!)).toBeLessThan(0);
      expect(compareEventIds(ids[2]!, ids[1]!)).toBeGreaterThan(0);
      expect(await log.since("chat-1", ids[0])).toEqual({
        events: [
          { id: ids[1], payload: "b" },
          { id: ids[2], payload: "c" },
        ],
        cursor: ids[2],
      });
      // Nothing after: continue from where the read started.
      expect(await log.since("chat-1", ids[2])).toEqual({ events: [], cursor: ids[2] });
      expect(payloads(await log.since("chat-1", "0-0"))).toEqual(["a", "b", "c"]);
      expect(await log.since("nobody")).toEqual({ events: [], cursor: "0-0" });
    });

    it("without an id, returns what no client was sent yet; the mark only moves forward", async () => {
      const log = await (await start()).open();
      const first = (await log.append("chat-1", "a")).id;
      const second = (await log.append("chat-1", "b")).id;
      const third = (await log.append("chat-1", "c")).id;
      expect(payloads(await log.since("chat-1"))).toEqual(["a", "b", "c"]);
      await log.markDelivered("chat-1", second);
      expect(payloads(await log.since("chat-1"))).toEqual(["c"]);
      await log.markDelivered("chat-1", first);
      expect(payloads(await log.since("chat-1"))).toEqual(["c"]);
      // A client with its own resume token still gets what it missed.
      expect(payloads(await log.since("chat-1", first))).toEqual(["b", "c"]);
      await log.markDelivered("chat-1", third);
      expect(await log.since("chat-1")).toEqual({ events: [], cursor: third });
    });

    it("says which event came just before the one it kept", async () => {
      const log = await (await start()).open();
      const first = await log.append("chat-1", "a");
      expect(first.previous).toBeUndefined();
      const second = await log.append("chat-1", "b");
      expect(second.previous).toBe(first.id);
      expect((await log.since("chat-1", second.previous)).events).toEqual([{ id: second.id, payload: "b" }]);
      expect((await log.append("chat-2", "elsewhere")).previous).toBeUndefined();
    });

    it("moves the marks of several chats reported at once, each to its newest", async () => {
      const log = await (await start()).open();
      const [a1, a2, b1] = [await log.append("chat-a", "1"), await log.append("chat-a", "2"), await log.append("chat-b", "1")];
      await Promise.all([log.markDelivered("chat-a", a2.id), log.markDelivered("chat-a", a1.id), log.markDelivered("chat-b", b1.id)]);
      expect(await log.since("chat-a")).toEqual({ events: [], cursor: a2.id });
      expect(await log.since("chat-b")).toEqual({ events: [], cursor: b1.id });
    });

    it("keeps chats apart", async () => {
      const log = await (await start()).open();
      await log.append("chat-1", "one");
      const other = (await log.append("chat-1:x", "two")).id;
      await log.markDelivered("chat-1:x", other);
      expect(payloads(await log.since("chat-1"))).toEqual(["one"]);
      expect(await log.since("chat-1:x")).toEqual({ events: [], cursor: other });
    });

    it("keeps only the newest events of a chat", async () => {
      const log = await (await start()).open({ maxPerChat: 3 });
      const ids: string[] = [];
      for (let index = 0; index < 5; index++) ids.push((await log.append("busy", `event ${index}`)).id);
      expect(payloads(await log.since("busy"))).toEqual(["event 2", "event 3", "event 4"]);
      // A token older than what is kept gets everything kept.
      expect(payloads(await log.since("busy", ids[0]))).toEqual(["event 2", "event 3", "event 4"]);
    });

    it("shows every log over the same storage the same events and marks", async () => {
      const harness = await start();
      const gatewayA = await harness.open();
      const gatewayB = await harness.open();
      const { id } = await gatewayA.append("chat-1", "from a");
      await gatewayB.append("chat-1", "from b");
      expect(payloads(await gatewayB.since("chat-1"))).toEqual(["from a", "from b"]);
      await gatewayB.markDelivered("chat-1", id);
      expect(payloads(await gatewayA.since("chat-1"))).toEqual(["from b"]);
    });
  });
}
