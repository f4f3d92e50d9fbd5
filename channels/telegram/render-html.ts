/**
 * The model's Markdown rendered as Telegram's HTML subset (this platform's `render`). The Markdown
 * is parsed with `marked` (CommonMark + GFM, so unbalanced `*`, half links and stray backticks stay
 * literal text the way every Markdown viewer shows them) and every token is written out by this
 * file: tags come only from here, always nested, and every piece of text (raw HTML in the model's
 * output included) is escaped, so the result parses whatever the input. Headings become bold
 * lines, lists `• ` lines (ordered lists keep their numbers), tables a monospace block, images a link.
 *
 * Telegram forbids some nestings (nothing inside `code`/`pre`, no `code` inside a link, no
 * blockquote in a blockquote), so those are written without the inner tag.
 */
import { Lexer, type MarkedToken, type Token, type Tokens } from "marked";
import { renderListLines } from "../../src/gateway/kit/index.js";

/** Renders `text` (the model's Markdown) as Telegram HTML. Never throws. */
export function renderTelegramHtml(text: string): string {
  let rendered: string;
  try {
    rendered = renderBlocks(new Lexer({ gfm: true }).lex(text), {}).join("\n\n");
  } catch {
    return escapeHtml(text);
  }
  // Telegram refuses a message with no visible text (e.g. an empty code block): show the source.
  if (rendered.replace(/<[^>]*>/g, "").trim() === "" && text.trim() !== "") return escapeHtml(text);
  return rendered;
}

/**
 * The length Telegram counts for `text` once rendered: the text after parsing the entities (tags
 * excluded, `&lt;` one character).
 */
export function telegramRenderedLength(text: string): number {
  return renderTelegramHtml(text)
    .replace(/<[^>]*>/g, "")
    .replace(/&(?:lt|gt|amp|quot);/g, "_").length;
}

export function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function escapeAttribute(text: string): string {
  return escapeHtml(text).replace(/"/g, "&quot;");
}

/** Where a token is written: what encloses it decides which tags it may use. */
interface Context {
  inQuote?: boolean;
  inLink?: boolean;
  /** Inline tags already open around this token (b, i, s): not opened again. */
  open?: ReadonlySet<string>;
  listDepth?: number;
}

function renderBlocks(tokens: Token[], context: Context): string[] {
  const blocks: string[] = [];
  for (const token of tokens) {
    const block = renderBlock(token, context);
    if (block !== undefined && block !== "") blocks.push(block);
  }
  return blocks;
}

function renderBlock(generic: Token, context: Context): string | undefined {
  const token = generic as MarkedToken;
  switch (token.type) {
    case "space":
    case "checkbox":
      return undefined;
    case "paragraph":
      return renderInline(token.tokens, context);
    case "text":
      return token.tokens ? renderInline(token.tokens, context) : escapeHtml(token.text);
    case "heading":
      return wrap("b", renderInline(token.tokens, withOpen(context, "b")), context);
    case "code":
      return renderCode(token, context);
    case "blockquote": {
      const inner = renderBlocks(token.tokens, { ...context, inQuote: true }).join("\n");
      return context.inQuote ? inner : `<blockquote>${inner}</blockquote>`;
    }
    case "list":
      return renderList(token, context);
    case "table":
      return renderTable(token, context);
    case "hr":
      return "──────────";
    case "html":
      return escapeHtml(token.text.trimEnd());
    case "def":
      return escapeHtml(token.raw.trim());
    default:
      return escapeHtml(generic.raw ?? "");
  }
}

function renderCode(token: Tokens.Code, context: Context): string {
  const info = token.lang?.trim() ?? "";
  const language = /^[\w+#.-]{1,32}$/.exec(info.split(/\s+/)[0] ?? "")?.[0];
  // An info string that is no language name is text the model meant to show: keep it.
  const code = escapeHtml(!language && info ? `${info}\n${token.text}` : token.text);
  if (context.inQuote) return code; // Telegram: a blockquote holds no pre
  return language ? `<pre><code class="language-${language}">${code}</code></pre>` : `<pre>${code}</pre>`;
}

function renderList(list: Tokens.List, context: Context): string {
  return renderListLines(list, context.listDepth ?? 0, "• ", (child, depth) => renderBlock(child, { ...context, listDepth: depth }), "  ");
}

/** A table as aligned monospace text: Telegram has no tables. */
function renderTable(table: Tokens.Table, context: Context): string {
  const rows = [table.header, ...table.rows].map((row) => row.map((cell) => plainText(cell.tokens)));
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => [...(row[column] ?? "")].length)));
  const lines = rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column]! + cell.length - [...cell].length)).join(" | ").trimEnd());
  lines.splice(1, 0, widths.map((width) => "-".repeat(width)).join("-+-"));
  const text = escapeHtml(lines.join("\n"));
  return context.inQuote ? text : `<pre>${text}</pre>`;
}

function renderInline(tokens: Token[], context: Context): string {
  return tokens.map((token) => renderInlineToken(token, context)).join("");
}

function renderInlineToken(generic: Token, context: Context): string {
  const token = generic as MarkedToken;
  switch (token.type) {
    case "text":
      return token.tokens ? renderInline(token.tokens, context) : escapeHtml(token.text);
    case "escape":
      return escapeHtml(token.text);
    case "strong":
      return wrap("b", renderInline(token.tokens, withOpen(context, "b")), context);
    case "em":
      return wrap("i", renderInline(token.tokens, withOpen(context, "i")), context);
    case "del":
      return wrap("s", renderInline(token.tokens, withOpen(context, "s")), context);
    case "codespan":
      return context.inLink ? escapeHtml(token.text) : `<code>${escapeHtml(token.text)}</code>`;
    case "br":
      return "\n";
    case "link": {
      const label = renderInline(token.tokens, { ...context, inLink: true });
      return link(token.href, label, context);
    }
    case "image":
      return link(token.href, escapeHtml(token.text || "image"), context);
    case "html":
      return escapeHtml(token.text);
    default: {
      const children = (generic as Tokens.Generic).tokens;
      return children ? renderInline(children, context) : escapeHtml(generic.raw ?? "");
    }
  }
}

/** A link Telegram opens; any other target (relative, `javascript:`) is shown as text after the label. */
function link(target: string, label: string, context: Context): string {
  const href = safeHref(target);
  if (href && !context.inLink) return `<a href="${escapeAttribute(href)}">${label || escapeHtml(href)}</a>`;
  if (!label) return escapeHtml(target);
  return href || target === "" || context.inLink ? label : `${label} (${escapeHtml(target)})`;
}

function wrap(tag: string, inner: string, context: Context): string {
  if (inner === "" || context.open?.has(tag)) return inner;
  return `<${tag}>${inner}</${tag}>`;
}

function withOpen(context: Context, tag: string): Context {
  return { ...context, open: new Set([...(context.open ?? []), tag]) };
}

/** Links Telegram opens: web, mail and tg:// only; anything else stays text. */
function safeHref(href: string): string | undefined {
  try {
    const url = new URL(href);
    return ["http:", "https:", "mailto:", "tg:"].includes(url.protocol) ? href : undefined;
  } catch {
    return undefined;
  }
}

/** The text of inline tokens without any markup (for table cells). */
function plainText(tokens: Token[]): string {
  return tokens
    .map((token) => {
      if (token.type === "br") return " ";
      const generic = token as Tokens.Generic;
      if (generic.tokens && token.type !== "image") return plainText(generic.tokens);
      return typeof generic.text === "string" ? generic.text : token.raw;
    })
    .join("");
}
