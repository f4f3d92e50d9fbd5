/**
 * The event loop's lag as the send governor reads it: a loop held up shows as lag (so calls taken
 * then are counted from when they can leave), and it never reads more than a second.
 */
import { describe, expect, it } from "vitest";
import { eventLoopLagMs } from "../../../src/gateway/event-loop-lag.js";

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("event loop lag", () => {
  it("shows a loop held up for 400 ms as at least 300 ms of lag, and never more than 1 s", async () => {
    eventLoopLagMs();
    await tick(120);
    const until = Date.now() + 400;
    while (Date.now() < until); // the loop held up, as a burst of work would
    await tick(120);
    const lag = eventLoopLagMs();
    expect(lag).toBeGreaterThanOrEqual(300);
    expect(lag).toBeLessThanOrEqual(1_000);
  });
});
