import { describe, expect, it } from "vitest";
import { areaTag, chatTag, hashTag, partitionOf, partitionTag } from "../../src/redis/keys.js";

describe("the hash-tag convention", () => {
  it("maps a session key to its partition with FNV-1a, the same everywhere", () => {
    // FNV-1a 32 of "a" is 0xe40c292c (the published test vector): 3826002220.
    expect(partitionOf("a", 7)).toBe(3826002220 % 7);
    expect(partitionOf("a", 16)).toBe(3826002220 % 16);
    expect(partitionOf("telegram:123", 1)).toBe(0);
  });

  it("spreads chats over every partition", () => {
    const seen = new Set<number>();
    for (let chat = 0; chat < 200; chat += 1) seen.add(partitionOf(`web:chat-${chat}`, 8));
    expect([...seen].sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it("builds the tags the keys carry", () => {
    expect(hashTag("countbot")).toBe("{countbot}");
    expect(areaTag("countbot", "budget")).toBe("{countbot:budget}");
    expect(partitionTag("countbot", 3)).toBe("{countbot:p3}");
    expect(chatTag("countbot", "a", 16)).toBe(`{countbot:p${3826002220 % 16}}`);
  });
});
