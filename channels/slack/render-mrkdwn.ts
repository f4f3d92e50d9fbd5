/**
 * The model's Markdown rendered as Slack's mrkdwn (this platform's `render`). mrkdwn is not
 * Markdown: bold is `*b*`, italic `_i_`, strike-through `~s~`, a link `<url|label>`, and there are
 * no headings, tables or images. The text is parsed with `marked` (CommonMark + GFM) and written
 * out again:
 *
 * - `&`, `<` and `>` are escaped everywhere (Slack reads `<…>` as a link or mention, `&…;` as an entity);
 * - a heading becomes a bold line, a table one line per row (`a | b`, the header in bold);
 * - a bullet list uses `•`, a task list ☐/☑, a code block keeps its fences without the language;
 * - a link Slack would not open (`javascript:`) is shown as text.
 *
 * Never throws: what cannot be parsed is sent as plain text.
 */
import { Lexer, type MarkedToken, type Token, type Tokens } from "marked";
import { type RenderedText, quoteLines, renderListLines } from "../../src/gateway/kit/index.js";

/** Slack's three control characters, escaped: the text shows them as typed. */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

export function renderSlackMrkdwn(markdown: string): RenderedText {
  try {
    const text = renderBlocks(new Lexer({ gfm: true }).lex(markdown), 0).join("\n\n");
    return text.trim() === "" ? { text: escapeMrkdwn(markdown), format: "plain" } : { text, format: "formatted" };
  } catch {
    return { text: escapeMrkdwn(markdown), format: "plain" };
  }
}

/** The length Slack is given for `markdown`: the rendered text's characters. */
export function slackRenderedLength(markdown: string): number {
  return renderSlackMrkdwn(markdown).text.length;
}

function renderBlocks(tokens: Token[], depth: number): string[] {
  return tokens.map((token) => renderBlock(token, depth)).filter((block): block is string => block !== undefined && block !== "");
}

function renderBlock(generic: Token, depth: number): string | undefined {
  const token = generic as MarkedToken;
  switch (token.type) {
    case "space":
    case "checkbox":
      return undefined;
    case "paragraph":
      return renderInline(token.tokens).trimEnd();
    case "text":
      return token.tokens ? renderInline(token.tokens) : escapeMrkdwn(token.text);
    case "heading":
      return `*${renderInline(token.tokens).replace(/\s*\n\s*/g, " ")}*`;
    case "code":
      return `\`\`\`\n${escapeMrkdwn(token.text)}\n\`\`\``;
    case "blockquote":
      return quoteLines(renderBlocks(token.tokens, depth));
    case "list":
      return renderListLines(token, depth, "• ", renderBlock);
    case "table":
      return renderTable(token);
    case "hr":
      return "———";
    case "html":
      return escapeMrkdwn(token.text.trimEnd());
    default:
      return escapeMrkdwn(generic.raw.trimEnd());
  }
}

/** Slack shows no tables: a row per line, cells apart by ` | `, the header in bold. */
function renderTable(table: Tokens.Table): string {
  const row = (cells: Tokens.TableCell[]) => cells.map((cell) => renderInline(cell.tokens).trim()).join(" | ");
  const header = row(table.header);
  return [header.replace(/[\s|]/g, "") === "" ? "" : `*${header}*`, ...table.rows.map(row)].filter((line) => line !== "").join("\n");
}

function renderInline(tokens: Token[]): string {
  return tokens.map(renderInlineToken).join("");
}

/** Wraps in a mrkdwn mark; Slack needs the mark next to a word, so surrounding spaces stay outside. */
function marked(mark: string, inner: string): string {
  const match = /^(\s*)([\s\S]*?)(\s*)$/.exec(inner)!;
  return match[2] === "" ? inner : `${match[1]}${mark}${match[2]}${mark}${match[3]}`;
}

function renderInlineToken(generic: Token): string {
  const token = generic as MarkedToken;
  switch (token.type) {
    case "text":
      return token.tokens ? renderInline(token.tokens) : escapeMrkdwn(token.text);
    case "escape":
      return escapeMrkdwn(token.text);
    case "strong":
      return marked("*", renderInline(token.tokens));
    case "em":
      return marked("_", renderInline(token.tokens));
    case "del":
      return marked("~", renderInline(token.tokens));
    case "codespan":
      return `\`${escapeMrkdwn(token.text)}\``;
    case "br":
      return "\n";
    case "link": {
      const label = renderInline(token.tokens);
      if (opens(token.href)) return label && label !== escapeMrkdwn(token.href) ? `<${token.href}|${label.replace(/\|/g, "¦")}>` : `<${token.href}>`;
      return label && token.href ? `${label} (${escapeMrkdwn(token.href)})` : label || escapeMrkdwn(token.href);
    }
    case "image":
      return opens(token.href) ? `<${token.href}|${escapeMrkdwn(token.text || "image")}>` : escapeMrkdwn(token.text);
    case "html":
      return escapeMrkdwn(token.text);
    default:
      return escapeMrkdwn(generic.raw);
  }
}

/** Links Slack opens as links: web and mail. */
function opens(href: string): boolean {
  try {
    return ["http:", "https:", "mailto:"].includes(new URL(href).protocol) && !/[<>|\s]/.test(href);
  } catch {
    return false;
  }
}
