/**
 * A POSIX/bash shell lexer, just deep enough for the exec policy: it splits a command line into
 * words, separators and redirections the way the shell would, so `echo "a;b"` stays one command
 * while `ls;rm` becomes two, and it finds every place where the shell will run another command
 * (`$( )`, backticks, `<( )`, `>( )`, unquoted heredoc bodies). Words keep their value with quotes
 * and escapes removed (`r\m` and `'r'm` are both `rm`, `$'\x72m'` too), and say whether the shell
 * will compute them at run time (variables, substitutions, globs, brace expansion).
 *
 * It never runs anything and fails closed: input it cannot follow (an unterminated quote or
 * substitution) is reported as a problem and the command is refused.
 */

export interface Word {
  /** Quotes removed and escapes applied; expansions are kept as written (`$HOME` stays `$HOME`). */
  value: string;
  /** The text as written. */
  raw: string;
  /** The shell computes (part of) it at run time: a variable, substitution, glob or brace expansion. */
  dynamic: boolean;
  /** Some part was quoted or escaped (matters for assignments and heredoc delimiters). */
  quoted: boolean;
  /** Scripts the shell runs while expanding this word: `$( )`, backticks, `<( )`, `>( )`. */
  substitutions: string[];
}

export interface Heredoc {
  body: string;
  /** A quoted delimiter (`<<'EOF'`) turns off expansion in the body. */
  quoted: boolean;
  /** Substitutions in an unquoted body, which the shell runs. */
  substitutions: string[];
}

export type Token =
  | { kind: "word"; word: Word }
  | { kind: "separator"; operator: string }
  | { kind: "redirect"; operator: string; heredoc?: Heredoc };

export type LexResult = { ok: true; tokens: Token[] } | { ok: false; problem: string };

/** Splits `script` into tokens. */
export function tokenize(script: string): LexResult {
  const lexer = new Lexer(script, 0, false);
  const result = lexer.run();
  return result.ok ? { ok: true, tokens: result.tokens } : result;
}

class LexError extends Error {}

interface WordBuilder {
  start: number;
  value: string;
  /** Characters that were neither quoted nor escaped: where globs and braces expand. */
  bare: string;
  dynamic: boolean;
  quoted: boolean;
  substitutions: string[];
}

interface PendingHeredoc {
  token: { kind: "redirect"; operator: string; heredoc?: Heredoc };
  delimiter: string;
  quoted: boolean;
  stripTabs: boolean;
}

const REDIRECTS = ["<<<", "<<-", "<<", "<&", "<>", "<", ">>", ">&", ">|", ">"];
const ARITHMETIC = /^[\w\s+\-*/%<>=!&|^~?:,.$()[\]#'"]*$/;

class Lexer {
  private position: number;
  private readonly tokens: Token[] = [];
  private word: WordBuilder | undefined;
  private depth = 0;
  private heredocTarget: PendingHeredoc["token"] | undefined;
  private readonly pendingHeredocs: PendingHeredoc[] = [];

  constructor(
    private readonly text: string,
    start: number,
    /** Inside `$( )`: an unmatched `)` ends the scan. */
    private readonly nested: boolean,
  ) {
    this.position = start;
  }

  run(): { ok: true; tokens: Token[]; end: number } | { ok: false; problem: string } {
    try {
      const end = this.scan();
      return { ok: true, tokens: this.tokens, end };
    } catch (error) {
      if (error instanceof LexError) return { ok: false, problem: error.message };
      throw error;
    }
  }

  private scan(): number {
    const text = this.text;
    while (this.position < text.length) {
      const char = text[this.position] as string;
      const next = text[this.position + 1];
      if (this.scanWordPart(char, next)) continue;
      if (this.scanOperator(char, next)) return this.position;
    }
    if (this.nested) throw new LexError("unterminated $( ) or <( ) substitution");
    this.finishWord();
    return this.position;
  }

  /** Blanks, quoting, expansions, process substitutions and comments; false when `char` starts none of them. */
  private scanWordPart(char: string, next: string | undefined): boolean {
    const text = this.text;
    if (char === " " || char === "\t" || char === "\r") {
      this.finishWord();
      this.position += 1;
    } else if (char === "\\") {
      if (next === "\n") {
        this.position += 2;
        return true;
      }
      const word = this.currentWord();
      word.quoted = true;
      word.value += next ?? "\\";
      this.position += next === undefined ? 1 : 2;
    } else if (char === "'") {
      const end = text.indexOf("'", this.position + 1);
      if (end === -1) throw new LexError("unterminated single quote");
      const word = this.currentWord();
      word.quoted = true;
      word.value += text.slice(this.position + 1, end);
      this.position = end + 1;
    } else if (char === '"') {
      const word = this.currentWord();
      this.position = this.readDoubleQuoted(this.position + 1, word);
    } else if (char === "$") {
      this.position = this.readDollar(this.position, this.currentWord(), false);
    } else if (char === "`") {
      this.position = this.readBackticks(this.position, this.currentWord());
    } else if ((char === "<" || char === ">") && next === "(" && !this.word) {
      const word = this.currentWord();
      const inner = readParenthesized(text, this.position + 2);
      word.substitutions.push(inner.script);
      word.dynamic = true;
      word.value += text.slice(this.position, inner.end + 1);
      this.position = inner.end + 1;
    } else if (char === "#" && !this.word) {
      const end = text.indexOf("\n", this.position);
      this.position = end === -1 ? text.length : end;
    } else {
      return false;
    }
    return true;
  }

  /** Separators and redirections, else a plain character of the word; true when an unmatched `)` ends a nested scan. */
  private scanOperator(char: string, next: string | undefined): boolean {
    const text = this.text;
    if (char === "\n") {
      this.finishWord();
      this.separator("\n", 1);
      this.readHeredocBodies();
    } else if (char === ";") {
      this.finishWord();
      this.separator(text.startsWith(";;&", this.position) ? ";;&" : next === ";" ? ";;" : next === "&" ? ";&" : ";");
    } else if (char === "&") {
      this.finishWord();
      if (next === "&") this.separator("&&");
      else if (next === ">") this.redirect(text[this.position + 2] === ">" ? "&>>" : "&>", "");
      else this.separator("&");
    } else if (char === "|") {
      this.finishWord();
      this.separator(next === "|" ? "||" : next === "&" ? "|&" : "|");
    } else if (char === "(") {
      this.finishWord();
      this.depth += 1;
      this.separator("(");
    } else if (char === ")") {
      this.finishWord();
      if (this.depth === 0 && this.nested) return true;
      this.depth = Math.max(0, this.depth - 1);
      this.separator(")");
    } else if (char === "<" || char === ">") {
      const word = this.word;
      let descriptor = "";
      if (word && /^\d+$/.test(word.value) && !word.quoted && !word.dynamic) {
        descriptor = word.value;
        this.word = undefined;
      } else {
        this.finishWord();
      }
      const operator = REDIRECTS.find((candidate) => text.startsWith(candidate, this.position)) as string;
      this.redirect(operator, descriptor);
    } else {
      const word = this.currentWord();
      word.value += char;
      word.bare += char;
      this.position += 1;
    }
    return false;
  }

  private currentWord(): WordBuilder {
    this.word ??= { start: this.position, value: "", bare: "", dynamic: false, quoted: false, substitutions: [] };
    return this.word;
  }

  private finishWord(): void {
    const word = this.word;
    if (!word) return;
    this.word = undefined;
    // Globs and brace expansion only happen outside quotes.
    if (/[*?]|\[[^\]]*\]/.test(word.bare) || /\{[^}]*(,|\.\.)[^}]*\}/.test(word.bare)) word.dynamic = true;
    const finished: Word = {
      value: word.value,
      raw: this.text.slice(word.start, this.position),
      dynamic: word.dynamic,
      quoted: word.quoted,
      substitutions: word.substitutions,
    };
    this.tokens.push({ kind: "word", word: finished });
    if (this.heredocTarget) {
      const operator = this.heredocTarget.operator;
      this.pendingHeredocs.push({ token: this.heredocTarget, delimiter: finished.value, quoted: finished.quoted, stripTabs: operator.endsWith("<<-") });
      this.heredocTarget = undefined;
    }
  }

  private separator(operator: string, length = operator.length): void {
    this.tokens.push({ kind: "separator", operator });
    this.position += length;
  }

  private redirect(operator: string, descriptor: string): void {
    const token: PendingHeredoc["token"] = { kind: "redirect", operator: descriptor + operator };
    this.tokens.push(token);
    this.position += operator.length;
    if (operator === "<<" || operator === "<<-") this.heredocTarget = token;
  }

  /** After a newline, the bodies of the heredocs opened on that line follow. */
  private readHeredocBodies(): void {
    const text = this.text;
    for (const pending of this.pendingHeredocs.splice(0)) {
      let body = "";
      while (this.position < text.length) {
        const newline = text.indexOf("\n", this.position);
        const lineEnd = newline === -1 ? text.length : newline;
        const line = text.slice(this.position, lineEnd);
        this.position = newline === -1 ? text.length : newline + 1;
        if ((pending.stripTabs ? line.replace(/^\t+/, "") : line) === pending.delimiter) break;
        body += `${line}\n`;
      }
      const substitutions: string[] = [];
      if (!pending.quoted) {
        const scanner = new Lexer(body, 0, false);
        const word: WordBuilder = { start: 0, value: "", bare: "", dynamic: false, quoted: false, substitutions };
        scanner.readExpanding(0, word, undefined);
      }
      pending.token.heredoc = { body, quoted: pending.quoted, substitutions };
    }
  }

  private readDoubleQuoted(start: number, word: WordBuilder): number {
    word.quoted = true;
    return this.readExpanding(start, word, '"');
  }

  /**
   * The inside of double quotes (terminator `"`) or of an unquoted heredoc body (no terminator):
   * only `$`, backticks and backslash are special.
   */
  private readExpanding(start: number, word: WordBuilder, terminator: '"' | undefined): number {
    const text = this.text;
    let position = start;
    for (;;) {
      const char = text[position];
      if (char === undefined) {
        if (terminator) throw new LexError("unterminated double quote");
        return position;
      }
      if (char === terminator) return position + 1;
      if (char === "\\") {
        const next = text[position + 1];
        if (next !== undefined && "$`\"\\\n".includes(next)) {
          if (next !== "\n") word.value += next;
          position += 2;
        } else {
          word.value += "\\";
          position += 1;
        }
      } else if (char === "$") {
        position = this.readDollar(position, word, true);
      } else if (char === "`") {
        position = this.readBackticks(position, word);
      } else {
        word.value += char;
        position += 1;
      }
    }
  }

  /** `$'..'`, `$".."`, `$( )`, `$(( ))`, `${ }`, `$name`, or a plain dollar sign. */
  private readDollar(position: number, word: WordBuilder, inDoubleQuotes: boolean): number {
    const text = this.text;
    const next = text[position + 1];
    if (!inDoubleQuotes && next === "'") {
      let end = position + 2;
      while (end < text.length && text[end] !== "'") end += text[end] === "\\" ? 2 : 1;
      if (end >= text.length) throw new LexError("unterminated $'...' quote");
      word.quoted = true;
      word.value += decodeAnsiC(text.slice(position + 2, end));
      return end + 1;
    }
    if (!inDoubleQuotes && next === '"') return this.readDoubleQuoted(position + 2, word);
    if (next === "(") {
      const inner = readParenthesized(text, position + 2);
      word.dynamic = true;
      word.value += text.slice(position, inner.end + 1);
      const arithmetic = inner.script.startsWith("(") && inner.script.endsWith(")") && looksArithmetic(inner.script.slice(1, -1));
      // `$((1+2))` is arithmetic; bash runs `$((cmd) )` as a command, so only a real expression is spared.
      if (arithmetic) word.substitutions.push(...inner.tokens.flatMap(substitutionsOf));
      else word.substitutions.push(inner.script);
      return inner.end + 1;
    }
    if (next === "{") {
      const end = this.readBraced(position + 2, word);
      word.dynamic = true;
      word.value += text.slice(position, end);
      return end;
    }
    const name = /^(?:[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])/.exec(text.slice(position + 1, position + 200));
    if (name) {
      word.dynamic = true;
      word.value += `$${name[0]}`;
      return position + 1 + name[0].length;
    }
    word.value += "$";
    return position + 1;
  }

  /** `${ ... }`: its value is dynamic, and substitutions inside it still run. */
  private readBraced(start: number, word: WordBuilder): number {
    const text = this.text;
    const scratch: WordBuilder = { start, value: "", bare: "", dynamic: true, quoted: true, substitutions: word.substitutions };
    let position = start;
    for (;;) {
      const char = text[position];
      if (char === undefined) throw new LexError("unterminated ${...} expansion");
      if (char === "}") return position + 1;
      if (char === "\\") position += 2;
      else if (char === "'") {
        const end = text.indexOf("'", position + 1);
        if (end === -1) throw new LexError("unterminated single quote");
        position = end + 1;
      } else if (char === '"') position = this.readDoubleQuoted(position + 1, scratch);
      else if (char === "$") position = this.readDollar(position, scratch, true);
      else if (char === "`") position = this.readBackticks(position, scratch);
      else position += 1;
    }
  }

  private readBackticks(position: number, word: WordBuilder): number {
    const text = this.text;
    let end = position + 1;
    while (end < text.length && text[end] !== "`") end += text[end] === "\\" ? 2 : 1;
    if (end >= text.length) throw new LexError("unterminated backtick substitution");
    word.dynamic = true;
    word.substitutions.push(text.slice(position + 1, end).replace(/\\([`$\\])/g, "$1"));
    word.value += text.slice(position, end + 1);
    return end + 1;
  }
}

/** The script inside `$(` ... `)` starting at `start`, found by lexing it (quotes and nesting count). */
function readParenthesized(text: string, start: number): { script: string; end: number; tokens: Token[] } {
  const result = new Lexer(text, start, true).run();
  if (!result.ok) throw new LexError(result.problem);
  return { script: text.slice(start, result.end), end: result.end, tokens: result.tokens };
}

function substitutionsOf(token: Token): string[] {
  if (token.kind === "word") return token.word.substitutions;
  return token.kind === "redirect" ? (token.heredoc?.substitutions ?? []) : [];
}

/** An arithmetic expression, not a command: no two words side by side (`rm -rf x` has `rf x`). */
function looksArithmetic(expression: string): boolean {
  return ARITHMETIC.test(expression) && !/[\w$\])]\s+[\w$([]/.test(expression);
}

const SIMPLE_ESCAPES: Record<string, string> = {
  a: "\x07", b: "\b", e: "\x1b", E: "\x1b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
};

/** Bash's `$'...'` escapes, so `$'\x72\x6d'` is seen as `rm`. */
export function decodeAnsiC(content: string): string {
  return content.replace(/\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)/gs, (whole, escape: string) => {
    const kind = escape[0] as string;
    if (kind === "x" || kind === "u" || kind === "U") return safeCodePoint(Number.parseInt(escape.slice(1), 16));
    if (/[0-7]/.test(kind)) return String.fromCharCode(Number.parseInt(escape, 8) & 0xff);
    if (kind === "c" && escape.length === 2) return String.fromCharCode((escape.charCodeAt(1) & 0x1f) >>> 0);
    return SIMPLE_ESCAPES[kind] ?? whole;
  });
}

function safeCodePoint(code: number): string {
  return code >= 0 && code <= 0x10ffff ? String.fromCodePoint(code) : "";
}
