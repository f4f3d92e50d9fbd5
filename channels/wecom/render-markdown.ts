/**
 * The model's Markdown for a WeCom `markdown` message. WeCom shows a subset: headings, bold, links,
 * inline code, quotes and `<font color>`; the rest shows as its characters, which reads well enough
 * (lists, code fences). What it cannot show at all is turned into what it can:
 *
 * - a table becomes one line per row, cells joined by ` | `, the alignment row dropped;
 * - `~~strike~~` keeps its words; an image becomes its link.
 *
 * WeCom counts the content in UTF-8 bytes (at most 2048): {@link wecomRenderedBytes} measures so.
 */
import type { RenderedText } from "../../src/gateway/kit/index.js";

const TABLE_RULE = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;

function renderLine(line: string): string {
  if (TABLE_RULE.test(line)) return "";
  let out = line.replace(/~~([^~]+)~~/g, "$1").replace(/!\[([^\]]*)\]\(([^)\s]+)\)/g, "[$1]($2)");
  if (/^\s*\|.*\|\s*$/.test(out)) {
    out = out
      .trim()
      .replace(/^\|/, "")
      .replace(/\|$/, "")
      .split("|")
      .map((cell) => cell.trim())
      .join(" | ");
  }
  return out;
}

export function renderWeComMarkdown(markdown: string): RenderedText {
  let fenced = false;
  const lines = markdown.split("\n").flatMap((line) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced || /^\s*```/.test(line)) return [line];
    const rendered = renderLine(line);
    return rendered === "" && line.trim() !== "" ? [] : [rendered];
  });
  const text = lines.join("\n");
  return { text: text.trim() === "" ? markdown : text, format: "formatted" };
}

/** The bytes WeCom counts for `markdown` once rendered. */
export function wecomRenderedBytes(markdown: string): number {
  return Buffer.byteLength(renderWeComMarkdown(markdown).text, "utf8");
}
