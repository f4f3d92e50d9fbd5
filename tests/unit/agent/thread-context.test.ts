/**
 * A thread opened from a chat (Discord's `threads.inheritParent` names the parent in
 * `metadata.parentChatId`) starts from the parent's recent talk: its first turn sees the parent's
 * last entries, which then stay in the thread's own history; the parent is left as it was.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { HistoryEntry } from "../../../src/store/store.js";
import { type Harness, startHarness } from "../../support/agent-harness.js";
import { scriptedModel } from "../../support/scripted-model.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function talk(pairs: number): HistoryEntry[] {
  return Array.from({ length: pairs }, (_, index) => [
    { role: "user" as const, content: `parent question ${index}`, at: index, messageIds: [`p${index}`] },
    { role: "assistant" as const, content: `parent answer ${index}`, at: index },
  ]).flat();
}

const said = (request: { messages: Array<{ role: string; content: unknown }> }) => request.messages.filter((message) => message.role !== "system").map((message) => String(message.content));

describe("a thread's first turn", () => {
  it("starts from the parent chat's last entries, keeps them in the thread's history, and leaves the parent alone", async () => {
    const model = scriptedModel(() => ({ text: "answered in the thread" }));
    harness = await startHarness(model);
    const sessions = harness.runtime.infrastructure.store.sessions;
    // 6 pairs: the thread takes the last 10 entries, from a user message on.
    await sessions.append("test:channel-1", talk(6));

    await harness.send("thread-1", "what about the second point?", { metadata: { parentChatId: "channel-1" } });
    await harness.waitForFinals(1);
    expect(said(model.requests[0]!)).toEqual([
      "parent question 1",
      "parent answer 1",
      "parent question 2",
      "parent answer 2",
      "parent question 3",
      "parent answer 3",
      "parent question 4",
      "parent answer 4",
      "parent question 5",
      "parent answer 5",
      "what about the second point?",
    ]);
    const thread = (await sessions.load("test:thread-1")).history;
    expect(thread.map((entry) => entry.content)).toEqual([...said(model.requests[0]!), "answered in the thread"]);
    // The borrowed entries answer nothing in the thread: no message ids a re-run could match.
    expect(thread.slice(0, 10).every((entry) => entry.messageIds === undefined)).toBe(true);
    expect((await sessions.load("test:channel-1")).history).toHaveLength(12);

    // The next turn in the thread goes on from the thread's own history, not the parent's again.
    await sessions.append("test:channel-1", [{ role: "user", content: "later in the parent", at: 99 }]);
    await harness.send("thread-1", "and the third?", { metadata: { parentChatId: "channel-1" } });
    await harness.waitForFinals(2);
    const second = said(model.requests[1]!);
    expect(second).not.toContain("later in the parent");
    expect(second.slice(-3)).toEqual(["what about the second point?", "answered in the thread", "and the third?"]);
  });

  it("takes nothing without a parent, or from a parent with no history", async () => {
    const model = scriptedModel(() => ({ text: "ok" }));
    harness = await startHarness(model);
    await harness.runtime.infrastructure.store.sessions.append("test:channel-2", talk(2));
    await harness.send("plain-chat", "hello");
    await harness.send("thread-2", "hello there", { metadata: { parentChatId: "empty-channel" } });
    await harness.waitForFinals(2);
    // Two chats, answered in either order.
    expect(model.requests.map(said).sort()).toEqual([["hello"], ["hello there"]]);
  });
});
