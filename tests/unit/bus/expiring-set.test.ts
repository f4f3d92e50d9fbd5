import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { ExpiringSet } from "../../../src/bus/expiring-set.js";

const HOUR_MS = 60 * 60 * 1000;

/** The collector, without starting the process with --expose-gc. */
function collectGarbage(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

describe("ExpiringSet", () => {
  it("answers like SET NX for its whole time to live, and takes a member again once it expired", () => {
    let now = 1_000_000;
    const set = new ExpiringSet(HOUR_MS, () => now);
    expect(set.add("telegram:1")).toBe(true);
    expect(set.add("telegram:1")).toBe(false);
    expect(set.has("telegram:1")).toBe(true);
    expect(set.has("telegram:2")).toBe(false);
    now += HOUR_MS - 1;
    expect(set.add("telegram:1")).toBe(false);
    now += 1;
    expect(set.has("telegram:1")).toBe(false);
    expect(set.add("telegram:1")).toBe(true);
    expect(set.add("telegram:1")).toBe(false);
  });

  it("tells apart members that differ in one character, and the empty string", () => {
    const set = new ExpiringSet(HOUR_MS, () => 0);
    expect(set.add("web:a")).toBe(true);
    expect(set.add("web:b")).toBe(true);
    expect(set.add("web:a ")).toBe(true);
    expect(set.add("")).toBe(true);
    expect(set.add("")).toBe(false);
    expect(set.has("web:c")).toBe(false);
  });

  it("keeps every member through growth: 50,000 members, each refused again until it expires", () => {
    let now = 0;
    const set = new ExpiringSet(HOUR_MS, () => now);
    for (let index = 0; index < 50_000; index++) expect(set.add(`event-${index}`)).toBe(true);
    expect(set.size).toBe(50_000);
    now += HOUR_MS / 2;
    for (let index = 0; index < 50_000; index++) expect(set.add(`event-${index}`), `event-${index}`).toBe(false);
    for (let index = 50_000; index < 50_100; index++) expect(set.has(`event-${index}`)).toBe(false);
  });

  it("sweeps expired members as new ones come: the size returns to what the last TTL holds", () => {
    let now = 0;
    const set = new ExpiringSet(1_000, () => now);
    for (let index = 0; index < 10_000; index++) set.add(`old-${index}`);
    expect(set.size).toBe(10_000);
    now += 1_000;
    set.add("new");
    expect(set.size).toBe(1);
    for (let index = 0; index < 10_000; index++) expect(set.has(`old-${index}`)).toBe(false);
    expect(set.add("old-5")).toBe(true);
  });

  it("never holds more than maxSize: the oldest members go first and the rest still dedupe", () => {
    const set = new ExpiringSet(HOUR_MS, () => 0, 3_000);
    for (let index = 0; index < 10_000; index++) set.add(`event-${index}`);
    expect(set.size).toBe(3_000);
    for (let index = 7_000; index < 10_000; index++) expect(set.add(`event-${index}`), `event-${index}`).toBe(false);
    expect(set.has("event-6999")).toBe(false);
    expect(set.add("event-0")).toBe(true);
    expect(set.size).toBe(3_000);
  });

  it("keeps removals and additions consistent over many cycles of the ring (probe chains survive deletion)", () => {
    let now = 0;
    const set = new ExpiringSet(100, () => now, 512);
    const live = new Map<string, number>();
    for (let step = 0; step < 20_000; step++) {
      now += 1;
      for (const [member, expiresAt] of live) if (expiresAt <= now) live.delete(member);
      const member = `m-${(step * 7919) % 300}`;
      const expected = !live.has(member);
      expect(set.add(member), `step ${step}`).toBe(expected);
      if (expected) live.set(member, now + 100);
    }
  });

  it("keeps a member in a few dozen bytes, outside the JS heap: 200,000 members cost under 20 MB (a Map of them ~40 MB)", () => {
    collectGarbage();
    const before = process.memoryUsage();
    const set = new ExpiringSet(24 * HOUR_MS, () => 0);
    // Ids as the buses see them: fresh strings, as long as `web:<uuid>` or `<uuid>#0`.
    for (let index = 0; index < 200_000; index++) set.add(`web:${index.toString(16).padStart(8, "0")}-aaaa-4bbb-8ccc-${index.toString(36).padStart(12, "0")}`);
    collectGarbage();
    const after = process.memoryUsage();
    const heapGrowth = after.heapUsed - before.heapUsed;
    const total = heapGrowth + (after.arrayBuffers - before.arrayBuffers);
    // A Map of these strings held ~40 MB (the ids themselves and their entries).
    expect(heapGrowth).toBeLessThan(4 * 1024 * 1024);
    // Typed arrays replaced while growing may not be collected yet: room for one spare generation.
    expect(total).toBeLessThan(20 * 1024 * 1024);
    expect(set.has("web:00000000-aaaa-4bbb-8ccc-000000000000")).toBe(true);
  });
});
