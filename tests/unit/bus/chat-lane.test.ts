import { describe, expect, it } from "vitest";
import { ChatLane, KeyedLanes } from "../../../src/bus/chat-lane.js";

/** A promise the test settles by hand. */
function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void; fail: (error: Error) => void } {
  let open!: (value: T) => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<T>((resolve, reject) => ((open = resolve), (fail = reject)));
  return { promise, open, fail };
}

/** Lets every queued promise callback run. */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("ChatLane", () => {
  it("starts each task only once the one before it has settled, in queue order", async () => {
    const lane = new ChatLane();
    const log: string[] = [];
    const first = gate();
    const done = [
      lane.run(async () => {
        log.push("first starts");
        await first.promise;
        log.push("first ends");
      }),
      lane.run(() => void log.push("second")),
      lane.run(async () => void log.push("third")),
    ];
    await flush();
    expect(log).toEqual(["first starts"]);
    expect(lane.busy).toBe(true);
    first.open();
    await Promise.all(done);
    expect(log).toEqual(["first starts", "first ends", "second", "third"]);
    expect(lane.busy).toBe(false);
  });

  it("hands each task's result or failure to its caller, and a failure does not stop the lane", async () => {
    const lane = new ChatLane();
    const failing = lane.run(async () => {
      throw new Error("platform said no");
    });
    const next = lane.run(async () => 42);
    await expect(failing).rejects.toThrow("platform said no");
    await expect(next).resolves.toBe(42);
    await expect(lane.idle()).resolves.toBeUndefined();
  });

  it("idle() waits for what was queued before it", async () => {
    const lane = new ChatLane();
    const held = gate();
    let finished = false;
    void lane.run(() => held.promise.then(() => void (finished = true)));
    const idle = lane.idle();
    await flush();
    expect(finished).toBe(false);
    held.open();
    await idle;
    expect(finished).toBe(true);
  });
});

describe("KeyedLanes", () => {
  it("runs different keys concurrently while one key's tasks wait their turn", async () => {
    const lanes = new KeyedLanes();
    const log: string[] = [];
    const slow = gate();
    const done = [
      lanes.run("chat-a", async () => {
        await slow.promise;
        log.push("a1");
      }),
      lanes.run("chat-a", () => void log.push("a2")),
      lanes.run("chat-b", () => void log.push("b1")),
    ];
    await flush();
    expect(log).toEqual(["b1"]);
    expect(lanes.busy("chat-a")).toBe(true);
    expect(lanes.busy("chat-b")).toBe(false);
    slow.open();
    await Promise.all(done);
    expect(log).toEqual(["b1", "a1", "a2"]);
  });

  it("drops a lane once it is idle, and keeps one that got more work meanwhile", async () => {
    const lanes = new KeyedLanes();
    const held = gate();
    await lanes.run("chat-a", async () => undefined);
    void lanes.run("chat-b", () => held.promise);
    await flush();
    expect(lanes.size).toBe(1);
    expect(lanes.busy("chat-b")).toBe(true);
    held.open();
    await lanes.idle();
    await flush();
    expect(lanes.size).toBe(0);
  });

  it("idle() waits for every lane, failures included, without rejecting", async () => {
    const lanes = new KeyedLanes();
    const first = gate();
    const second = gate();
    const failed = lanes.run("chat-a", () => first.promise);
    void lanes.run("chat-b", () => second.promise);
    failed.catch(() => undefined);
    let idle = false;
    const waiting = lanes.idle().then(() => void (idle = true));
    first.fail(new Error("gone"));
    await flush();
    expect(idle).toBe(false);
    second.open();
    await waiting;
    expect(idle).toBe(true);
  });
});
