/**
 * Block pieces the Markdown renderers of platforms without rich lists or quotes share (DingTalk's
 * Markdown subset, Slack's mrkdwn): a list as indented lines and a quote as `> ` lines. Each
 * platform passes its own bullet and renders the blocks inside.
 */
import type { Token, Tokens } from "marked";

/**
 * A list as lines: the bullet (numbers when ordered), ☑/☐ for tasks, `unit` (four spaces) per
 * level; loose lists keep a blank line between items. A nested list carries its own indentation;
 * an item's other blocks continue its text.
 */
export function renderListLines(list: Tokens.List, depth: number, bullet: string, renderBlock: (token: Token, depth: number) => string | undefined, unit = "    "): string {
  const indent = unit.repeat(depth);
  const start = typeof list.start === "number" ? list.start : 1;
  const items = list.items.map((item, index) => {
    const head = `${indent}${list.ordered ? `${start + index}. ` : bullet}${item.task ? (item.checked ? "☑ " : "☐ ") : ""}`;
    const lines: string[] = [];
    for (const child of item.tokens) {
      const block = renderBlock(child, depth + 1);
      if (!block) continue;
      if (child.type === "list") {
        if (lines.length === 0) lines.push(head.trimEnd());
        lines.push(block);
      } else {
        lines.push(lines.length === 0 ? head + block : `${indent}${unit}${block}`);
      }
    }
    return lines.length === 0 ? head.trimEnd() : lines.join("\n");
  });
  return items.join(list.loose ? "\n\n" : "\n");
}

/** Rendered blocks quoted: `> ` before every line, a bare `>` for a blank one. */
export function quoteLines(blocks: readonly string[]): string {
  return blocks
    .join("\n\n")
    .split("\n")
    .map((line) => (line === "" ? ">" : `> ${line}`))
    .join("\n");
}
