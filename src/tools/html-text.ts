/**
 * HTML to readable text for web_fetch, and HTML entity decoding.
 *
 * A single forward scan with no DOM: tree-building parsers go quadratic on deeply nested tags (htmlparser2 spends ~50 s on
 * 400,000 unclosed `<div>`s, within a 2 MB cap), which a hostile page could use to stall the event
 * loop. Every step here moves forward.
 */

const rawTextElements = new Set(["script", "style", "title", "textarea", "xmp", "iframe", "noembed", "noframes", "noscript", "plaintext"]);
const hiddenElements = new Set(["template", "svg", "math", "select", "object", "canvas", "audio", "video", "datalist"]);
const voidElements = new Set(["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"]);
const paragraphElements = new Set([
  "p", "pre", "blockquote", "table", "ul", "ol", "dl", "figure", "hr", "section", "article", "header", "footer",
  "main", "nav", "aside", "form", "fieldset", "details", "address", "h1", "h2", "h3", "h4", "h5", "h6",
]);
const lineElements = new Set(["div", "li", "dt", "dd", "tr", "caption", "figcaption", "summary", "legend", "center"]);
const closingTagPatterns = new Map<string, RegExp>();

/** Collects text with collapsed whitespace, except inside `<pre>`, and at most one blank line between blocks. */
class TextBuilder {
  private readonly parts: string[] = [];
  private pendingBreaks = 0;
  private pendingSpace = false;
  private atLineStart = true;

  get length(): number {
    return this.parts.length;
  }

  since(index: number): string {
    return this.parts.slice(index).join("");
  }

  lineBreaks(count: number): void {
    this.pendingBreaks = Math.max(this.pendingBreaks, count);
  }

  text(raw: string, preformatted = false): void {
    if (preformatted) return this.push(raw, raw.endsWith("\n"));
    const collapsed = raw.replace(/\s+/g, " ");
    if (collapsed.startsWith(" ")) this.pendingSpace = true;
    const word = collapsed.trim();
    if (word !== "") this.push(word, false);
    if (word !== "" && collapsed.endsWith(" ")) this.pendingSpace = true;
  }

  /** Text that starts a line, like a list bullet: no space is added after it. */
  marker(text: string): void {
    this.push(text, true);
  }

  private push(text: string, endsLine: boolean): void {
    if (this.pendingBreaks > 0 && this.parts.length > 0) this.parts.push("\n".repeat(this.pendingBreaks));
    else if (this.pendingSpace && !this.atLineStart && this.pendingBreaks === 0) this.parts.push(" ");
    if (this.pendingBreaks > 0) this.atLineStart = true;
    this.pendingBreaks = 0;
    this.pendingSpace = false;
    this.parts.push(text);
    this.atLineStart = endsLine;
  }

  toString(): string {
    return this.parts.join("").replace(/\n{3,}/g, "\n\n").trim();
  }
}

/**
 * Readable text of an HTML document: the title apart; headings as `#` lines; paragraphs, lists and
 * table rows on their own lines; links as `text [absolute url]`; scripts, styles and hidden
 * content dropped.
 */
export function htmlToText(html: string, pageUrl?: URL): { title?: string; text: string } {
  return new HtmlTextWalker(pageUrl).walk(html);
}

/** One pass over a document: the text so far and where the walk is (hidden, preformatted, in which list, link and row). */
class HtmlTextWalker {
  private readonly out = new TextBuilder();
  private title: string | undefined;
  private hidden = 0;
  private preformatted = 0;
  private cellsInRow = 0;
  private readonly lists: Array<{ ordered: boolean; count: number }> = [];
  private link: { href: string | undefined; start: number } | undefined;

  constructor(private base: URL | undefined) {}

  walk(html: string): { title?: string; text: string } {
    const { out } = this;
    let index = 0;
    while (index < html.length) {
      const open = html.indexOf("<", index);
      const textEnd = open < 0 ? html.length : open;
      if (textEnd > index && this.hidden === 0) out.text(decodeEntities(html.slice(index, textEnd)), this.preformatted > 0);
      if (open < 0) break;
      const tag = readTag(html, open);
      if (!tag) {
        if (this.hidden === 0) out.text("<", this.preformatted > 0);
        index = open + 1;
        continue;
      }
      if (tag.kind === "eof") break;
      index = tag.end;
      if (tag.kind === "comment") continue;
      if (tag.kind === "start" && rawTextElements.has(tag.name)) {
        const after = this.skipRawText(html, tag.name, index);
        if (after === undefined) break;
        index = after;
        continue;
      }
      this.onTag(tag);
    }
    this.closeLink();
    const text = out.toString();
    return this.title ? { title: this.title, text } : { text };
  }

  /** Skips a script, style or title element's content (keeping the first title); where the walk goes on, or undefined when it never closes. */
  private skipRawText(html: string, name: string, index: number): number | undefined {
    const close = closingTagPattern(name);
    close.lastIndex = index;
    const match = close.exec(html);
    const content = html.slice(index, match ? match.index : html.length);
    if (name === "title" && this.title === undefined && this.hidden === 0) this.title = decodeEntities(content).replace(/\s+/g, " ").trim();
    return match ? match.index + match[0].length : undefined;
  }

  private onTag(tag: Tag & { kind: "start" | "end" }): void {
    const { name } = tag;
    if (hiddenElements.has(name)) {
      if (tag.kind === "start" && !tag.selfClosing) this.hidden += 1;
      else if (tag.kind === "end") this.hidden = Math.max(0, this.hidden - 1);
      return;
    }
    if (this.hidden > 0) return;
    if (tag.kind === "end") this.onEnd(name);
    else this.onStart(tag);
  }

  private onEnd(name: string): void {
    const { out, lists } = this;
    if (name === "a") this.closeLink();
    else if (name === "pre") this.preformatted = Math.max(0, this.preformatted - 1);
    else if ((name === "ul" || name === "ol") && lists.length > 0) lists.pop();
    if (paragraphElements.has(name)) out.lineBreaks(lists.length > 0 ? 1 : 2);
    else if (lineElements.has(name)) out.lineBreaks(1);
  }

  private onStart(tag: Tag & { kind: "start" }): void {
    const { out, lists } = this;
    const { name } = tag;
    const nestedList = (name === "ul" || name === "ol") && lists.length > 0;
    if (paragraphElements.has(name) && !nestedList) out.lineBreaks(2);
    else if (lineElements.has(name) || nestedList) out.lineBreaks(1);
    const heading = /^h([1-6])$/.exec(name);
    if (heading) out.marker(`${"#".repeat(Number(heading[1]))} `);
    switch (name) {
      case "br":
        out.lineBreaks(1);
        break;
      case "pre":
        if (!tag.selfClosing) this.preformatted += 1;
        break;
      case "ul":
      case "ol":
        if (!tag.selfClosing) lists.push({ ordered: name === "ol", count: 0 });
        break;
      case "li": {
        const list = lists[lists.length - 1];
        const bullet = list?.ordered ? `${(list.count += 1)}.` : "-";
        // Indentation is capped: a page of 100,000 nested lists must not cost 100,000 spaces a line.
        out.marker(`${"  ".repeat(Math.min(Math.max(0, lists.length - 1), 5))}${bullet} `);
        break;
      }
      case "tr":
        this.cellsInRow = 0;
        break;
      case "td":
      case "th":
        if (this.cellsInRow++ > 0) out.text(" | ");
        break;
      case "img": {
        const alt = attribute(tag.attributes, "alt")?.trim();
        if (alt) out.text(` ${alt} `);
        break;
      }
      case "base":
        this.base = absoluteUrl(attribute(tag.attributes, "href"), this.base) ?? this.base;
        break;
      case "a":
        this.closeLink();
        if (!tag.selfClosing) this.link = { href: linkTarget(attribute(tag.attributes, "href"), this.base), start: out.length };
        break;
    }
  }

  private closeLink(): void {
    const { link } = this;
    if (!link) return;
    const text = this.out.since(link.start).trim();
    if (link.href && text !== "" && text !== link.href) this.out.text(` [${link.href}]`);
    this.link = undefined;
  }
}

type Tag =
  | { kind: "start"; name: string; attributes: string; selfClosing: boolean; end: number }
  | { kind: "end"; name: string; end: number }
  | { kind: "comment"; end: number }
  | { kind: "eof" };

/** The tag at `start` (a `<`), or undefined when the `<` is plain text. Quoted attribute values may hold `>`. */
function readTag(html: string, start: number): Tag | undefined {
  const next = html[start + 1] ?? "";
  if (html.startsWith("<!--", start)) {
    const close = html.indexOf("-->", start + 4);
    return close < 0 ? { kind: "eof" } : { kind: "comment", end: close + 3 };
  }
  if (next === "!" || next === "?" || (next === "/" && !/[a-z]/i.test(html[start + 2] ?? ""))) {
    if (next === "/" && html[start + 2] === undefined) return undefined;
    const close = html.indexOf(">", start);
    return close < 0 ? { kind: "eof" } : { kind: "comment", end: close + 1 };
  }
  const isEnd = next === "/";
  const nameStart = start + (isEnd ? 2 : 1);
  const namePattern = /[a-z][^\s/>]*/iy;
  namePattern.lastIndex = nameStart;
  const nameMatch = namePattern.exec(html);
  if (!nameMatch) return undefined;
  const name = nameMatch[0].toLowerCase();
  let position = nameStart + nameMatch[0].length;
  let previous = "";
  while (position < html.length) {
    const char = html[position] as string;
    if (char === ">") {
      if (isEnd) return { kind: "end", name, end: position + 1 };
      const attributes = html.slice(nameStart + nameMatch[0].length, position);
      return { kind: "start", name, attributes, selfClosing: attributes.trimEnd().endsWith("/") || voidElements.has(name), end: position + 1 };
    }
    if ((char === '"' || char === "'") && previous === "=") {
      const close = html.indexOf(char, position + 1);
      if (close < 0) return { kind: "eof" };
      position = close + 1;
      previous = char;
      continue;
    }
    if (!/\s/.test(char)) previous = char;
    position += 1;
  }
  return { kind: "eof" };
}

function closingTagPattern(name: string): RegExp {
  let pattern = closingTagPatterns.get(name);
  if (!pattern) {
    pattern = new RegExp(`</${name}(?=[\\s/>])[^>]*>?`, "gi");
    closingTagPatterns.set(name, pattern);
  }
  return pattern;
}

function attribute(attributes: string, wanted: string): string | undefined {
  const pattern = /([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+)))?/g;
  for (let match = pattern.exec(attributes); match; match = pattern.exec(attributes)) {
    if (match[1]?.toLowerCase() === wanted) return decodeEntities(match[2] ?? match[3] ?? match[4] ?? "", { attribute: true });
  }
  return undefined;
}

function absoluteUrl(href: string | undefined, base: URL | undefined): URL | undefined {
  if (!href) return undefined;
  try {
    return new URL(href.trim(), base);
  } catch {
    return undefined;
  }
}

/** Where a link goes, when that is somewhere a reader can follow: http(s) or mailto, not `#top` or `javascript:`. */
function linkTarget(href: string | undefined, base: URL | undefined): string | undefined {
  if (!href || href.trim().startsWith("#")) return undefined;
  const url = absoluteUrl(href, base);
  return url && ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : undefined;
}

const namedEntities: Record<string, string> = {
  amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " ", ensp: " ", emsp: " ", thinsp: " ", shy: "",
  copy: "©", reg: "®", trade: "™", hellip: "…", mdash: "—", ndash: "–", minus: "−", lsquo: "‘", rsquo: "’",
  sbquo: "‚", ldquo: "“", rdquo: "”", bdquo: "„", laquo: "«", raquo: "»", lsaquo: "‹", rsaquo: "›", bull: "•",
  middot: "·", times: "×", divide: "÷", euro: "€", pound: "£", yen: "¥", cent: "¢", sect: "§", para: "¶",
  deg: "°", plusmn: "±", frac12: "½", frac14: "¼", frac34: "¾", micro: "µ", larr: "←", rarr: "→", uarr: "↑",
  darr: "↓", harr: "↔", le: "≤", ge: "≥", ne: "≠", asymp: "≈", infin: "∞", dagger: "†", Dagger: "‡",
  zwj: "\u200d", zwnj: "\u200c", lrm: "\u200e", rlm: "\u200f",
};

/**
 * Numeric references and the common named ones; an unknown name stays as written. In an attribute
 * a name needs its `;`, as in browsers, so `?a=1&copy=2` in a link stays a query string.
 */
export function decodeEntities(text: string, options: { attribute?: boolean } = {}): string {
  if (!text.includes("&")) return text;
  return text.replace(/&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([a-zA-Z][a-zA-Z0-9]{1,31}))(;?)/g, (whole, decimal?: string, hex?: string, name?: string, semicolon?: string) => {
    if (name !== undefined) return options.attribute && !semicolon ? whole : (namedEntities[name] ?? whole);
    const code = decimal !== undefined ? Number(decimal) : Number.parseInt(hex ?? "", 16);
    const valid = code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff);
    return valid ? String.fromCodePoint(code) : "\ufffd";
  });
}
