/** The terminal's Markdown: marked-terminal's rendering with list items' inline Markdown, printed block by block as a reply grows. */
import { describe, expect, it } from "vitest";
import { MarkdownBlocks, createTerminalMarkdown } from "../../../channels/cli/terminal-markdown.js";

const reply = [
  "# Plan",
  "",
  "Run **these** in order:",
  "",
  "1. install with `npm ci`",
  "2. **test**: *all* of it",
  "",
  "```sh",
  "npm test",
  "```",
  "",
  "| step | time |",
  "| --- | --- |",
  "| **test** | 2 min |",
  "",
  "> Done when it is green.",
].join("\n");

describe("terminal Markdown", () => {
  const markdown = createTerminalMarkdown({ color: false });

  it("renders bold, lists (their items' inline Markdown too), code, tables and quotes without their markers", () => {
    const shown = new MarkdownBlocks(markdown).finish(reply);
    expect(shown).not.toMatch(/\*|`|\| ---/m);
    // Without colour a heading keeps its `#`: nothing else would tell it from a line.
    expect(shown).toMatch(/^# Plan$/m);
    expect(shown).toContain("Run these in order:");
    expect(shown).toMatch(/^ {2}1\. install with npm ci$/m);
    expect(shown).toMatch(/^ {2}2\. test: all of it$/m);
    expect(shown).toMatch(/^ {2}npm test$/m);
    expect(shown).toMatch(/│ test +│ 2 min │/);
    expect(shown).toContain("Done when it is green.");
  });

  it("keeps the styles when colour is on, and drops control characters the reply carries", () => {
    const coloured = createTerminalMarkdown({ color: true });
    const shown = new MarkdownBlocks(coloured).finish("**bold** and a bell\u0007 and \u001b]0;title\u0007 here");
    expect(shown).toContain("\x1b[1mbold\x1b[22m");
    expect(new MarkdownBlocks(coloured).finish("# Plan")).not.toContain("#");
    expect(shown).not.toContain("\u0007");
    expect(shown).not.toContain("\u001b]");
  });

  it("streamed a character at a time, prints each block once, complete, and the same as the whole reply", () => {
    const blocks = new MarkdownBlocks(markdown);
    const printed: string[] = [];
    for (let length = 1; length < reply.length; length++) {
      const output = blocks.next(reply.slice(0, length));
      if (output !== "") printed.push(output);
    }
    printed.push(blocks.finish(reply));
    expect(printed.join("")).toBe(new MarkdownBlocks(markdown).finish(reply));
    // No half block: every print ends its last line, and there was one per block, not per snapshot.
    expect(printed.every((output) => output.endsWith("\n"))).toBe(true);
    expect(printed.length).toBeGreaterThanOrEqual(5);
    expect(printed.length).toBeLessThan(12);
  });
});
