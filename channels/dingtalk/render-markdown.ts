/**
 * The model's Markdown rendered as DingTalk's Markdown subset (this platform's `render`). DingTalk
 * documents headings, quotes, bold, italic, links, images and lists; a line break needs two spaces
 * before it, tables and strike-through are not shown. The text is parsed with `marked` (CommonMark
 * + GFM) and written out again:
 *
 * - a soft line break inside a paragraph becomes `  \n`, so the model's lines stay lines;
 * - a table becomes one line per row (`a | b`), the header in bold;
 * - `~~strike~~` keeps its words; a link DingTalk would not open (`javascript:`) is shown as text;
 * - code blocks keep their fences (current clients show them as code, older ones as the text).
 *
 * Never throws: what cannot be parsed is sent as it came.
 */
import { Lexer, type MarkedToken, type Token, type Tokens } from "marked";
import { type RenderedText, quoteLines, renderListLines } from "../../src/gateway/kit/index.js";

const LINE_BREAK = "  \n";

export function renderDingTalkMarkdown(markdown: string): RenderedText {
  try {
    const text = renderBlocks(new Lexer({ gfm: true }).lex(markdown), 0).join("\n\n");
    return { text: text.trim() === "" ? markdown : text, format: "formatted" };
  } catch {
    return { text: markdown, format: "plain" };
  }
}

/** The length DingTalk is given for `markdown`: the rendered text's characters. */
export function dingtalkRenderedLength(markdown: string): number {
  return renderDingTalkMarkdown(markdown).text.length;
}

/** The title a Markdown message needs (DingTalk shows it in notifications and the chat list): its first words. */
export function titleOf(text: string, fallback = "Reply"): string {
  const line = text
    .split("\n")
    .map((candidate) => candidate.replace(/[#>*_`~[\]()!|-]+/g, " ").replace(/\s+/g, " ").trim())
    .find((candidate) => candidate.length > 0);
  if (!line) return fallback;
  const characters = [...line];
  return characters.length > 20 ? `${characters.slice(0, 19).join("")}…` : line;
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
      return token.tokens ? renderInline(token.tokens) : token.raw;
    case "heading":
      return `${"#".repeat(token.depth)} ${renderInline(token.tokens).replace(/\s*\n\s*/g, " ")}`;
    case "code":
      return token.raw.trimEnd();
    case "blockquote":
      return quoteLines(renderBlocks(token.tokens, depth));
    case "list":
      return renderListLines(token, depth, "- ", renderBlock);
    case "table":
      return renderTable(token);
    case "hr":
      return "---";
    default:
      return generic.raw.trimEnd();
  }
}

/** DingTalk shows no tables: a row per line, cells apart by ` | `, the header in bold. */
function renderTable(table: Tokens.Table): string {
  const row = (cells: Tokens.TableCell[]) => cells.map((cell) => renderInline(cell.tokens).trim()).join(" | ");
  const header = table.header.map((cell) => renderInline(cell.tokens).trim()).filter((cell) => cell !== "");
  const lines = [header.length > 0 ? `**${header.join(" | ")}**` : "", ...table.rows.map(row)].filter((line) => line !== "");
  return lines.join(LINE_BREAK);
}

function renderInline(tokens: Token[]): string {
  return tokens.map(renderInlineToken).join("");
}

function renderInlineToken(generic: Token): string {
  const token = generic as MarkedToken;
  switch (token.type) {
    case "text":
      // A soft break inside a paragraph: DingTalk joins the lines unless the break is marked.
      return token.tokens ? renderInline(token.tokens) : token.raw.replace(/ *\n/g, LINE_BREAK);
    case "strong":
      return `**${renderInline(token.tokens)}**`;
    case "em":
      return `*${renderInline(token.tokens)}*`;
    case "del":
      return renderInline(token.tokens);
    case "br":
      return LINE_BREAK;
    case "link": {
      const label = renderInline(token.tokens);
      if (opens(token.href)) return `[${label || token.href}](${token.href})`;
      return label && token.href ? `${label} (${token.href})` : label || token.href;
    }
    case "image":
      return opens(token.href) ? `![${token.text}](${token.href})` : token.text;
    default:
      return generic.raw;
  }
}

/** Links DingTalk opens: web, mail and its own `dingtalk://` pages. */
function opens(href: string): boolean {
  try {
    return ["http:", "https:", "mailto:", "dingtalk:"].includes(new URL(href).protocol);
  } catch {
    return false;
  }
}
