import { describe, expect, it } from "vitest";
import { telegramRenderedLength } from "../../../channels/telegram/render-html.js";
import { splitMessage } from "../../../src/gateway/split-message.js";

/** A small seeded generator (mulberry32): every failing case can be replayed from its seed. */
function random(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
  const int = (low: number, high: number) => low + Math.floor(next() * (high - low + 1));
  const pick = <T>(items: readonly T[]): T => items[int(0, items.length - 1)]!;
  return { next, int, pick };
}

const WORDS = ["the", "reply", "a", "Telegram", "café", "naïve", "**bold**", "*it", "`x < y`", "&amp;", "<div>", "日本語", "👍", "👩‍👩‍👧", "[link](https://example.com)", "e.g.", "1.5", "-", "#tag", "~~s~~"];

/** Random Markdown-ish text: paragraphs, lines, sentences, lists, long words, fenced code (closed or not). */
function randomText(rng: ReturnType<typeof random>): string {
  const parts: string[] = [];
  const blocks = rng.int(1, 12);
  for (let block = 0; block < blocks; block++) {
    const kind = rng.int(0, 9);
    if (kind <= 4) {
      const lines = rng.int(1, 4);
      const paragraph: string[] = [];
      for (let line = 0; line < lines; line++) {
        const words: string[] = [];
        for (let word = rng.int(1, 40); word > 0; word--) {
          words.push(rng.next() < 0.02 ? "x".repeat(rng.int(30, 400)) : rng.pick(WORDS));
          if (rng.next() < 0.1) words[words.length - 1] += rng.pick([".", "!", "?", "。"]);
        }
        paragraph.push((rng.next() < 0.2 ? rng.pick(["- ", "1. ", "> ", "## "]) : "") + words.join(rng.next() < 0.1 ? "  " : " "));
      }
      parts.push(paragraph.join("\n"));
    } else {
      const fence = rng.pick(["```", "```", "````", "~~~"]);
      const indent = rng.pick(["", "", "  ", "   "]);
      const language = rng.pick(["", "ts", "python", "c++", "sh"]);
      const lines: string[] = [];
      for (let line = rng.int(0, 30); line > 0; line--) {
        lines.push(rng.next() < 0.05 ? "" : `${" ".repeat(rng.int(0, 6))}const value${line} = call(a < b, "${"y".repeat(rng.int(0, rng.next() < 0.05 ? 300 : 30))}");`);
      }
      const closed = rng.next() < 0.85;
      parts.push(`${indent}${fence}${language}\n${lines.join("\n")}${closed ? `\n${indent}${fence}` : ""}`);
      if (!closed) break;
    }
  }
  return parts.join(rng.pick(["\n\n", "\n", "\n\n\n"]));
}

/** Whether every fenced block opened in `chunk` is closed in it (an independent reading of fences). */
function fencesBalanced(chunk: string): boolean {
  let open: { char: string; size: number } | undefined;
  for (const line of chunk.split("\n")) {
    const match = /^[ \t]*(`{3,}|~{3,})(.*)$/.exec(line);
    if (!match) continue;
    const [, fence, rest] = match as unknown as [string, string, string];
    if (!open) {
      if (fence[0] === "`" && rest.includes("`")) continue;
      open = { char: fence[0]!, size: fence.length };
    } else if (fence[0] === open.char && fence.length >= open.size && rest.trim() === "") {
      open = undefined;
    }
  }
  return open === undefined;
}

const normalized = (text: string) => text.replace(/^(?:[ \t]*\n)+/, "").trimEnd();

/**
 * Finds the chunks in the text, in order, allowing for the fences the splitter adds (a reopening
 * line at the start, a closing line at the end) and whitespace-only gaps between chunks. Returns
 * the gaps, or throws naming the chunk that is not where it should be.
 */
function locate(text: string, chunks: string[]): string[] {
  const gaps: string[] = [];
  let cursor = 0;
  for (const [index, chunk] of chunks.entries()) {
    const withoutOpen = chunk.replace(/^(?:`{3,}|~{3,})[^\n]*\n/, "");
    const variants = [chunk, withoutOpen, chunk.replace(/\n[ \t]*(?:`{3,}|~{3,})$/, ""), withoutOpen.replace(/\n[ \t]*(?:`{3,}|~{3,})$/, "")];
    const gap = /^\s*/.exec(text.slice(cursor))![0];
    let at = -1;
    let found: string | undefined;
    // The chunk may keep some of the gap's whitespace (the indentation of its first line).
    for (let offset = gap.length; offset >= 0 && found === undefined; offset--) {
      found = variants.find((variant) => variant.length > 0 && text.startsWith(variant, cursor + offset));
      at = cursor + offset;
    }
    if (found === undefined) throw new Error(`chunk ${index} not found at ${cursor}: ${JSON.stringify(chunk.slice(0, 80))}`);
    gaps.push(text.slice(cursor, at));
    cursor = at + found.length;
  }
  expect(text.slice(cursor).trim()).toBe("");
  return gaps.slice(1);
}

describe("splitMessage", () => {
  it("keeps a short text whole and drops a blank one", () => {
    expect(splitMessage("hello **world**", 100)).toEqual(["hello **world**"]);
    expect(splitMessage("\n\n  \n", 100)).toEqual([]);
  });

  it("prefers paragraph breaks, then line breaks, then sentences, then words", () => {
    const paragraphs = "First paragraph here.\nStill first.\n\nSecond paragraph.";
    expect(splitMessage(paragraphs, 40)).toEqual(["First paragraph here.\nStill first.", "Second paragraph."]);
    expect(splitMessage("one line here\nanother line here", 20)).toEqual(["one line here", "another line here"]);
    expect(splitMessage("First sentence is here. Second one follows it.", 30)).toEqual(["First sentence is here.", "Second one follows it."]);
    expect(splitMessage("alpha beta gamma delta epsilon", 12)).toEqual(["alpha beta", "gamma delta", "epsilon"]);
  });

  it("packs as much as fits at the preferred kind of break", () => {
    const text = ["aaaa", "bbbb", "cccc", "dddd"].join("\n\n");
    expect(splitMessage(text, 12)).toEqual(["aaaa\n\nbbbb", "cccc\n\ndddd"]);
  });

  it("cuts a word only when it alone is over the limit, never inside an emoji", () => {
    expect(splitMessage("short " + "x".repeat(25), 10)).toEqual(["short", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxx"]);
    const emoji = "👩‍👩‍👧".repeat(4); // 8 UTF-16 units each
    for (const chunk of splitMessage(emoji, 17)) expect(chunk).toMatch(/^(?:👩‍👩‍👧)+$/);
  });

  it("keeps a code block whole when it fits in a message of its own", () => {
    const code = "```ts\n" + Array.from({ length: 5 }, (_, line) => `const line${line} = ${line};`).join("\n") + "\n```";
    const text = `${"Intro words. ".repeat(4).trim()}\n\n${code}\n\nAfter the code.`;
    const chunks = splitMessage(text, code.length + 5);
    expect(chunks).toContain(code);
  });

  it("closes a code block that must be split and reopens it with its language", () => {
    const lines = Array.from({ length: 12 }, (_, line) => `print(${line})`);
    const chunks = splitMessage("```python\n" + lines.join("\n") + "\n```", 60);
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) {
      expect(chunk.startsWith("```python\n")).toBe(true);
      expect(chunk.endsWith("\n```")).toBe(true);
      expect(chunk.length).toBeLessThanOrEqual(60);
    }
    expect(chunks.map((chunk) => chunk.slice("```python\n".length, -"\n```".length)).join("\n")).toBe(lines.join("\n"));
  });

  it("closes a fence the text left open", () => {
    expect(splitMessage("look:\n```sh\nls -la", 100)).toEqual(["look:\n```sh\nls -la\n```"]);
  });

  it("holds each chunk to the measure it is given", () => {
    const text = "a < b & c > d. ".repeat(40);
    const measure = (chunk: string) => telegramRenderedLength(chunk) + chunk.split("<").length * 3;
    for (const chunk of splitMessage(text, 50, { measure })) expect(measure(chunk)).toBeLessThanOrEqual(50);
  });

  it("refuses a limit too small to hold anything", () => {
    expect(() => splitMessage("hello", 0)).toThrow(RangeError);
  });

  describe("properties over random texts", () => {
    const cases = Array.from({ length: 300 }, (_, seed) => seed + 1);

    it.each(cases)("seed %i: chunks fit, fences balance, the text comes back in order", (seed) => {
      const rng = random(seed);
      const text = randomText(rng);
      const maxLength = rng.int(40, 400);
      const measure = rng.next() < 0.5 ? undefined : (chunk: string) => Math.max(chunk.length, telegramRenderedLength(chunk));
      const chunks = splitMessage(text, maxLength, { measure });
      for (const chunk of chunks) {
        expect(chunk.trim()).not.toBe("");
        expect((measure ?? ((value: string) => value.length))(chunk)).toBeLessThanOrEqual(maxLength);
        expect(fencesBalanced(chunk), JSON.stringify(chunk)).toBe(true);
      }
      for (const gap of locate(normalized(text), chunks)) expect(gap).toMatch(/^\s*$/);
    });

    it.each(cases)("seed %i: prose with no overlong word is only cut at whitespace", (seed) => {
      const rng = random(seed * 7919);
      const words = Array.from({ length: rng.int(20, 300) }, () => rng.pick(["one", "two.", "three?", "fourteen", "日本", "👍", "x-y"]));
      const text = words.map((word) => word + rng.pick([" ", " ", " ", "\n", "\n\n"])).join("");
      const chunks = splitMessage(text, rng.int(12, 200));
      for (const gap of locate(normalized(text), chunks)) expect(gap).toMatch(/^\s+$/);
    });
  });
});
