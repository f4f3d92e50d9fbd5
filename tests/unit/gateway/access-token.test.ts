/** The channel kit's app access token cache and JSON reading, which DingTalk and QQ share. */
import { describe, expect, it } from "vitest";
import { AccessTokenCache, readJsonBody } from "../../../src/gateway/kit/index.js";

/** A token source whose answers the test releases one at a time. */
function scriptedSource() {
  const waiting: Array<(token: { value: string; expiresInMs: number }) => void> = [];
  let bought = 0;
  return {
    fetch: () =>
      new Promise<{ value: string; expiresInMs: number }>((resolve) => {
        bought += 1;
        waiting.push(resolve);
      }),
    answer: (value: string, expiresInMs = 60_000) => waiting.shift()!({ value, expiresInMs }),
    get bought() {
      return bought;
    },
  };
}

describe("AccessTokenCache", () => {
  it("buys one token for callers that arrive together, and keeps it until the margin before its end", async () => {
    let now = 0;
    const source = scriptedSource();
    const tokens = new AccessTokenCache(source.fetch, 10_000, () => now);
    const first = tokens.get();
    const second = tokens.get();
    source.answer("t1", 60_000);
    expect(await Promise.all([first, second])).toEqual(["t1", "t1"]);
    now = 49_999;
    expect(await tokens.get()).toBe("t1");
    expect(source.bought).toBe(1);
    now = 50_000;
    const renewed = tokens.get();
    source.answer("t2");
    expect(await renewed).toBe("t2");
    expect(source.bought).toBe(2);
  });

  it("forgets a refused token, but not one a newer token already replaced", async () => {
    const source = scriptedSource();
    const tokens = new AccessTokenCache(source.fetch, 0, () => 0);
    const first = tokens.get();
    source.answer("t1");
    await first;
    tokens.invalidate("stale");
    expect(await tokens.get()).toBe("t1");
    tokens.invalidate("t1");
    const again = tokens.get();
    source.answer("t2");
    expect(await again).toBe("t2");
  });

  it("hands a failed purchase to every waiting caller, and tries again on the next call", async () => {
    let attempt = 0;
    const tokens = new AccessTokenCache(async () => {
      attempt += 1;
      if (attempt === 1) throw new Error("refused");
      return { value: "t2", expiresInMs: 60_000 };
    }, 0, () => 0);
    await expect(Promise.all([tokens.get(), tokens.get()])).rejects.toThrow("refused");
    expect(attempt).toBe(1);
    expect(await tokens.get()).toBe("t2");
  });
});

describe("readJsonBody", () => {
  it("reads JSON, an empty body as {}, and anything else as the start of its text", async () => {
    expect(await readJsonBody(new Response('{"code":0}'))).toEqual({ code: 0 });
    expect(await readJsonBody(new Response(" "))).toEqual({});
    expect(await readJsonBody(new Response(`<html>${"x".repeat(300)}`))).toEqual({ message: `<html>${"x".repeat(194)}` });
  });
});
