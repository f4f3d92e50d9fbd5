import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { sleep } from "../../src/sleep.js";

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

/** Whether the promise has settled after the microtasks queued so far ran. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await vi.advanceTimersByTimeAsync(0);
  return done;
}

describe("sleep", () => {
  it("resolves once its time has passed, not before", async () => {
    const waiting = sleep(1_000);
    await vi.advanceTimersByTimeAsync(999);
    expect(await settled(waiting)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await expect(waiting).resolves.toBeUndefined();
  });

  it("rejects with the signal's reason when the signal aborts, and stops its timer", async () => {
    const controller = new AbortController();
    const waiting = sleep(60_000, controller.signal);
    const reason = new Error("stopped by the user");
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("rejects at once when the signal has already aborted", async () => {
    const controller = new AbortController();
    controller.abort("shutdown");
    await expect(sleep(60_000, controller.signal)).rejects.toBe("shutdown");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("leaves no listener on a signal that outlives it", async () => {
    const controller = new AbortController();
    const removed = vi.spyOn(controller.signal, "removeEventListener");
    const waiting = sleep(10, controller.signal);
    await vi.advanceTimersByTimeAsync(10);
    await waiting;
    expect(removed).toHaveBeenCalledWith("abort", expect.any(Function));
    controller.abort(new Error("later"));
  });
});
