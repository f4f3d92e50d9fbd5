import { describe, expect, it } from "vitest";
import { forgetOldest } from "../../src/bounded.js";

/** A Map that counts how often it is walked from the front. */
class CountingMap<K, V> extends Map<K, V> {
  walks = 0;
  override keys(): MapIterator<K> {
    this.walks += 1;
    return super.keys();
  }
}

describe("forgetOldest", () => {
  it("keeps a map at most at its limit, forgetting the oldest entries first", () => {
    const map = new Map<string, number>();
    for (let index = 0; index < 1_000; index += 1) {
      map.set(`key-${index}`, index);
      forgetOldest(map, 160);
      expect(map.size).toBeLessThanOrEqual(160);
    }
    const kept = [...map.values()];
    // The newest are kept, in order, with nothing missing between them.
    expect(kept.at(-1)).toBe(999);
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, index) => 1_000 - kept.length + index));
    expect(kept.length).toBeGreaterThanOrEqual(150);
  });

  it("walks the collection once per sixteenth of its limit, not once per insert", () => {
    const map = new CountingMap<number, true>();
    for (let index = 0; index < 16_000; index += 1) {
      map.set(index, true);
      forgetOldest(map, 1_600);
    }
    // (16,000 − 1,600) inserts past the limit, a walk per 100 of them.
    expect(map.walks).toBeLessThanOrEqual(145);
    expect(map.walks).toBeGreaterThan(0);
  });

  it("trims a set, and a limit of 1 keeps one member", () => {
    const set = new Set<string>();
    for (const member of ["a", "b", "c"]) {
      set.add(member);
      forgetOldest(set, 1);
    }
    expect([...set]).toEqual(["c"]);
  });

  it("leaves a collection within its limit alone", () => {
    const map = new CountingMap<number, true>([[1, true], [2, true]]);
    forgetOldest(map, 2);
    expect([...map.keys()]).toEqual([1, 2]);
    expect(map.walks).toBe(1); // the test's own walk
  });
});
