/**
 * How a reply shows on QQ. With `markdown: true` the model's Markdown goes out as a native
 * Markdown message (msg_type 2), as is: QQ renders CommonMark's common marks, and a refusal makes
 * the dispatcher send the source as plain text. Otherwise replies are plain text messages, and the
 * marks that would show as clutter are taken out: headings' `#`, emphasis, inline code's backticks,
 * code fences (their code kept), links as `text (url)`, images as their alt text and URL.
 */
import type { RenderedText } from "../../src/gateway/kit/index.js";

export function plainOf(markdown: string): string {
  const lines: string[] = [];
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      continue;
    }
    if (fenced) {
      lines.push(line);
      continue;
    }
    lines.push(
      line
        .replace(/^\s{0,3}#{1,6}\s+/, "")
        .replace(/^\s{0,3}>\s?/, "")
        .replace(/^(\s*)[*+-]\s+/, "$1• ")
        .replace(/!\[([^\]]*)\]\(([^)\s]+)[^)]*\)/g, "$1 ($2)")
        .replace(/\[([^\]]+)\]\(([^)\s]+)[^)]*\)/g, (_, text: string, url: string) => (text === url ? url : `${text} (${url})`))
        .replace(/(\*\*|__)(?=\S)(.+?)(?<=\S)\1/g, "$2")
        .replace(/(^|[^*\w])([*_])(?=\S)([^*_\n]+?)(?<=\S)\2(?![*\w])/g, "$1$3")
        .replace(/~~(?=\S)(.+?)(?<=\S)~~/g, "$1")
        .replace(/`([^`\n]+)`/g, "$1"),
    );
  }
  return lines.join("\n");
}

export function createRenderer(markdown: boolean): { render(text: string): RenderedText; measure(text: string): number } {
  if (markdown) return { render: (text) => ({ text, format: "formatted" }), measure: (text) => text.length };
  return { render: (text) => ({ text: plainOf(text), format: "plain" }), measure: (text) => plainOf(text).length };
}
