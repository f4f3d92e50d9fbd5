/** The governor's waiting lines: one task of a key at a time, the longest backlog next, first come first among equals. */
import { describe, expect, it } from "vitest";
import { BacklogQueues } from "../../../src/gateway/backlog-queues.js";

/** A task that runs until released, recording when it started. */
function gate(started: string[], label: string) {
  let release = () => {};
  const done = new Promise<void>((resolve) => (release = resolve));
  return {
    task: async () => {
      started.push(label);
      await done;
    },
    release: () => release(),
  };
}

describe("backlog queues", () => {
  it("runs one task of a key at a time, the waiting one with the longest backlog next, equals in the order they came", async () => {
    const queues = new BacklogQueues();
    const started: string[] = [];
    const gates = { first: gate(started, "first"), a: gate(started, "a"), b: gate(started, "b"), long: gate(started, "long"), c: gate(started, "c") };
    const runs = [
      queues.run("bot", { backlog: 0, since: 0 }, gates.first.task),
      queues.run("bot", { backlog: 0, since: 0 }, gates.a.task),
      queues.run("bot", { backlog: 2, since: 0 }, gates.b.task),
      queues.run("bot", { backlog: 7, since: 0 }, gates.long.task),
      queues.run("bot", { backlog: 2, since: 0 }, gates.c.task),
    ];
    const other = queues.run("chat", { backlog: 0, since: 0 }, async () => void started.push("other key"));
    await other;
    expect(started).toEqual(["first", "other key"]);
    for (const next of ["first", "long", "b", "c", "a"] as const) {
      gates[next].release();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(runs);
    expect(started).toEqual(["first", "other key", "long", "b", "c", "a"]);
    expect(queues.busy("bot")).toBe(false);
  });

  it("lets the running task step back behind a longer backlog that came while it ran, and resume after it", async () => {
    const queues = new BacklogQueues();
    const order: string[] = [];
    let wake = () => {};
    const woken = new Promise<void>((resolve) => (wake = resolve));
    const head = queues.run("bot", { backlog: 0, since: 0 }, async () => {
      order.push("head waits for room");
      await woken;
      if (queues.outranked("bot", { backlog: 0, since: 0 })) await queues.yield("bot", { backlog: 0, since: 0 });
      order.push("head takes");
    });
    const plain = queues.run("bot", { backlog: 0, since: 0 }, async () => void order.push("plain takes"));
    const busy = queues.run("bot", { backlog: 3, since: 0 }, async () => void order.push("busy takes"));
    expect(queues.outranked("bot", { backlog: 3, since: 0 })).toBe(false);
    wake();
    await Promise.all([head, plain, busy]);
    expect(order).toEqual(["head waits for room", "busy takes", "head takes", "plain takes"]);
    expect(queues.busy("bot")).toBe(false);
  });

  it("hands a task's failure to its caller and goes on with the next", async () => {
    const queues = new BacklogQueues();
    const failing = queues.run("bot", { backlog: 0, since: 0 }, async () => {
      throw new Error("platform down");
    });
    const next = queues.run("bot", { backlog: 0, since: 0 }, async () => "next ran");
    await expect(failing).rejects.toThrow("platform down");
    await expect(next).resolves.toBe("next ran");
    expect(queues.busy("bot")).toBe(false);
  });
});
