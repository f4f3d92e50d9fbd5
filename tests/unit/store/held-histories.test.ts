/**
 * The histories a process holds between session loads (src/store/redis-session-loads.ts): bounded
 * by the size of their stored text, the session loaded longest ago going first, and none larger
 * than a quarter of the bound held at all.
 */
import { describe, expect, it } from "vitest";
import { type Held, HeldHistories } from "../../../src/store/redis-session-loads.js";

const held = (bytes: number): Held => ({ stamp: "1:0:1:0", count: 2, entries: [{ role: "user", content: "x", at: 1 }], bytes });

describe("held histories", () => {
  it("keeps within its bound, dropping the session loaded longest ago first", () => {
    const histories = new HeldHistories(100);
    for (const key of ["a", "b", "c", "d"]) histories.keep(key, held(25));
    // Loading "a" again (what it held, then what it read, kept) makes it the newest: "b" is the one to go.
    histories.keep("a", { ...histories.take("a")!, count: 3 });
    histories.keep("e", held(25));
    expect(histories.take("b")).toBeUndefined();
    for (const key of ["a", "c", "d", "e"]) expect(histories.take(key), key).toBeDefined();
  });

  it("holds nothing larger than a quarter of the bound, nor an empty history, and replaces what a key held", () => {
    const histories = new HeldHistories(100);
    histories.keep("big", held(26));
    expect(histories.take("big")).toBeUndefined();
    histories.keep("empty", { ...held(0), count: 0 });
    expect(histories.take("empty")).toBeUndefined();
    histories.keep("x", held(20));
    histories.keep("x", held(10));
    expect(histories.take("x")?.bytes).toBe(10);
    // The replaced one's bytes are not counted twice: four more of 25 fit beside nothing else.
    histories.drop("x");
    for (const key of ["p", "q", "r", "s"]) histories.keep(key, held(25));
    for (const key of ["p", "q", "r", "s"]) expect(histories.take(key), key).toBeDefined();
  });
});
