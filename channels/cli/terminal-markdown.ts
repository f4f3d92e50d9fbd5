/**
 * The model's Markdown for a terminal, rendered by marked-terminal on marked's parser (bold, lists,
 * code blocks highlighted, tables drawn). Control characters in the reply are dropped by
 * marked-terminal, so a reply cannot steer the terminal with escape sequences of its own.
 *
 * A streamed reply grows snapshot by snapshot, and Markdown cannot be rendered piecemeal (`**bo`
 * is not yet bold). {@link MarkdownBlocks} prints a block once it is complete, that is once another
 * block follows it in marked's lexing: what is on the screen never has to change. The last block
 * is printed when the reply is final.
 */
import { stripVTControlCharacters } from "node:util";
import { Chalk } from "chalk";
import { Marked, type Token, type Tokens, type TokensList } from "marked";
import { markedTerminal } from "marked-terminal";

export interface TerminalMarkdownOptions {
  /** Columns (rules and tables). Default 80. */
  width?: number;
  /** ANSI styles; off: the same layout without them. */
  color: boolean;
}

export interface TerminalMarkdown {
  lex(markdown: string): TokensList;
  /** Blocks of a lexed reply, as terminal text ending in a line break. */
  render(blocks: Token[], links: TokensList["links"]): string;
}

export function createTerminalMarkdown(options: TerminalMarkdownOptions): TerminalMarkdown {
  // Our own chalk: the chat decides on colour (a terminal, NO_COLOR unset), not chalk's guess.
  const style = new Chalk({ level: options.color ? 1 : 0 });
  const marked = new Marked(
    { gfm: true },
    markedTerminal({
      width: options.width ?? 80,
      reflowText: false,
      emoji: false,
      tab: 2,
      // Without colour a heading looks like any line: its `#` says what it is.
      showSectionPrefix: !options.color,
      code: style.yellow,
      blockquote: style.gray.italic,
      html: style.gray,
      heading: style.green.bold,
      firstHeading: style.magenta.underline.bold,
      strong: style.bold,
      em: style.italic,
      codespan: style.yellow,
      del: style.dim.gray.strikethrough,
      link: style.blue,
      href: style.blue.underline,
    }),
  );
  // marked-terminal leaves the inline Markdown of tight list items as it is (`- **a**` shows the
  // asterisks; its issue #371): their text tokens carry inline tokens, rendered here.
  marked.use({
    renderer: {
      text(token: Tokens.Text | Tokens.Escape) {
        return "tokens" in token && token.tokens ? this.parser.parseInline(token.tokens) : false;
      },
    },
  });
  return {
    lex: (markdown) => marked.lexer(markdown),
    render(blocks, links) {
      const rendered = marked.parser(Object.assign([...blocks], { links }));
      return options.color ? rendered : stripVTControlCharacters(rendered);
    },
  };
}

/** What to print of a reply as its snapshots arrive: complete blocks only, each once. */
export class MarkdownBlocks {
  /** The source of the blocks printed so far. */
  private printedSource = "";
  private printedBlocks = 0;
  private printedAny = false;

  constructor(private readonly markdown: TerminalMarkdown) {}

  /** Whether a block was printed yet. */
  get started(): boolean {
    return this.printedAny;
  }

  /** The blocks this snapshot completed (the last one may still grow), or "" when none. */
  next(snapshot: string): string {
    return this.take(snapshot, false);
  }

  /** The rest of the reply, the last block included. */
  finish(text: string): string {
    return this.take(text, true);
  }

  private take(text: string, final: boolean): string {
    const tokens = this.markdown.lex(text);
    const source = tokens.map((token) => token.raw).join("");
    if (!source.startsWith(this.printedSource)) {
      // Not a continuation of what is shown (the reply was rewritten): only the final is shown again, whole.
      if (!final) return "";
      this.printedSource = "";
      this.printedBlocks = 0;
    }
    const end = final ? tokens.length : tokens.length - 1;
    const blocks = tokens.slice(this.printedBlocks, Math.max(end, this.printedBlocks));
    if (blocks.length === 0) return "";
    this.printedBlocks += blocks.length;
    this.printedSource += blocks.map((token) => token.raw).join("");
    let rendered = this.markdown.render(blocks, tokens.links);
    // Blocks end in a blank line; the reply's last one ends its line only.
    if (final) rendered = rendered.replace(/\n+$/, "\n");
    if (rendered.trim() === "") return "";
    this.printedAny = true;
    return rendered;
  }
}
