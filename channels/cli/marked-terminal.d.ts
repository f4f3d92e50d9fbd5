// marked-terminal ships no types, and @types/marked-terminal pins a marked four majors old: only
// what channels/cli/terminal-markdown.ts uses.
declare module "marked-terminal" {
  import type { MarkedExtension } from "marked";

  type Style = (text: string) => string;

  export interface TerminalRendererOptions {
    /** Columns for rules, tables and reflowed text. */
    width?: number;
    /** Re-wrap paragraphs to `width` (off: the terminal wraps them). */
    reflowText?: boolean;
    /** `:smile:` to an emoji. */
    emoji?: boolean;
    /** Spaces a list or code block is indented by. */
    tab?: number;
    /** Keep a heading's `#`s. */
    showSectionPrefix?: boolean;
    /** Styles, each a function from text to styled text (chalk's). */
    code?: Style;
    blockquote?: Style;
    html?: Style;
    heading?: Style;
    firstHeading?: Style;
    strong?: Style;
    em?: Style;
    codespan?: Style;
    del?: Style;
    link?: Style;
    href?: Style;
  }

  export function markedTerminal(options?: TerminalRendererOptions, highlightOptions?: Record<string, unknown>): MarkedExtension;
}
