/**
 * The long-polling loop on its own, against a getUpdates that keeps Telegram's rule (updates at or
 * after the offset, until confirmed): an update the bus cannot store now is tried again for as long
 * as that lasts; one whose handling keeps failing is skipped after maxAttempts.
 */
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { type Polling, startPolling } from "../../../channels/telegram/polling.js";
import { BusError } from "../../../src/errors.js";

let polling: Polling | undefined;
afterEach(async () => {
  await polling?.stop();
  polling = undefined;
});

function telegram(ids: number[]) {
  let offset = 0;
  return {
    getUpdates: async (params: { offset?: number }, signal: AbortSignal) => {
      offset = Math.max(offset, params.offset ?? 0);
      const pending = ids.filter((id) => id >= offset).map((id) => ({ update_id: id }));
      if (pending.length > 0) return pending;
      // Long poll: nothing new until stopped.
      await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener("abort", () => resolve(), { once: true })));
      return [];
    },
    offset: () => offset,
  };
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

describe("telegram polling", () => {
  it("keeps an update the bus cannot store, however many tries that takes, and then goes on in order", async () => {
    const server = telegram([10, 11]);
    const handled: number[] = [];
    let refusals = 0;
    polling = startPolling({
      getUpdates: server.getUpdates,
      handle: async (update) => {
        const id = (update as { update_id: number }).update_id;
        if (id === 10 && refusals < 8) {
          refusals += 1;
          throw new BusError("the bus already holds 10000 messages that no turn has finished (agent.maxQueuedMessages); nothing was stored", "unavailable");
        }
        handled.push(id);
      },
      timeoutSeconds: 30,
      logger: pino({ level: "silent" }),
      maxAttempts: 3,
      backoffBaseMs: 1,
    });
    await until(() => handled.length === 2, "both updates handled");
    expect(refusals).toBe(8);
    expect(handled).toEqual([10, 11]);
    // Both confirmed: the next poll asks from 12.
    await until(() => server.offset() === 12, "the offset past both");
  });

  it("skips an update whose handling fails maxAttempts times, and handles the next", async () => {
    const server = telegram([20, 21]);
    const tries = new Map<number, number>();
    const handled: number[] = [];
    polling = startPolling({
      getUpdates: server.getUpdates,
      handle: async (update) => {
        const id = (update as { update_id: number }).update_id;
        tries.set(id, (tries.get(id) ?? 0) + 1);
        if (id === 20) throw new Error("cannot parse this one");
        handled.push(id);
      },
      timeoutSeconds: 30,
      logger: pino({ level: "silent" }),
      maxAttempts: 3,
      backoffBaseMs: 1,
    });
    await until(() => handled.length === 1, "the next update handled");
    expect(tries.get(20)).toBe(3);
    expect(handled).toEqual([21]);
  });
});
