/**
 * Where a JSON text stops being valid JSON. `JSON.parse` on Node 20 names the position only for
 * some errors, and its messages quote the surrounding text (which may hold a secret), so the
 * config loader finds the position itself and writes its own reason.
 */

/** A syntax error in a JSON text: 1-based line and column, and what was found there. */
export interface JsonSyntaxError {
  offset: number;
  line: number;
  column: number;
  reason: string;
}

const stop = Symbol("stop");

/** Locates the first syntax error in `text`; undefined when `text` is valid JSON. */
export function findJsonSyntaxError(text: string): JsonSyntaxError | undefined {
  const offset = firstInvalidOffset(text);
  if (offset === undefined) return undefined;
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const column = offset - (before.lastIndexOf("\n") + 1) + 1;
  return { offset, line, column, reason: describe(text, offset) };
}

function describe(text: string, offset: number): string {
  const found = text[offset];
  if (found === undefined) return "unexpected end of file";
  const previous = text.slice(0, offset).trimEnd().at(-1);
  let hint = "";
  if ((found === "}" || found === "]") && previous === ",") hint = " (JSON allows no trailing comma)";
  else if (found === "/") hint = " (JSON allows no comments)";
  else if (found === "'") hint = " (JSON strings take double quotes)";
  return `unexpected ${JSON.stringify(found)}${hint}`;
}

/** How far `text` is valid JSON: the offset of the first error, undefined when there is none. */
function firstInvalidOffset(text: string): number | undefined {
  const reader = new JsonReader(text);
  try {
    reader.readValue();
    reader.skipSpace();
    return reader.index < text.length ? reader.index : undefined;
  } catch (error) {
    if (error === stop) return reader.index;
    throw error;
  }
}

/**
 * A small recursive-descent JSON reader that only tracks how far the text is valid: each `read`
 * moves `index` past one valid piece, or throws `stop` with `index` where the text went wrong.
 */
class JsonReader {
  index = 0;
  private readonly number = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

  constructor(private readonly text: string) {}

  skipSpace(): void {
    while (this.index < this.text.length && " \t\n\r".includes(this.text[this.index] as string)) this.index++;
  }

  readValue(): void {
    this.skipSpace();
    const character = this.text[this.index];
    if (character === "{") return this.readSequence("}", () => this.readMember());
    if (character === "[") return this.readSequence("]", () => this.readValue());
    if (character === '"') return this.readString();
    this.readScalar();
  }

  private expect(character: string): void {
    this.skipSpace();
    if (this.text[this.index] !== character) throw stop;
    this.index++;
  }

  /** An object's `"key": value`. */
  private readMember(): void {
    this.skipSpace();
    if (this.text[this.index] !== '"') throw stop;
    this.readString();
    this.expect(":");
    this.readValue();
  }

  /** A number, `true`, `false` or `null`. */
  private readScalar(): void {
    const { text } = this;
    this.number.lastIndex = this.index;
    if (this.number.test(text)) {
      this.index = this.number.lastIndex;
      return;
    }
    for (const word of ["true", "false", "null"]) {
      if (text.startsWith(word, this.index)) {
        this.index += word.length;
        return;
      }
    }
    throw stop;
  }

  private readString(): void {
    const { text } = this;
    this.index++; // the opening quote
    for (;;) {
      const character = text[this.index];
      if (character === undefined || character < " ") throw stop;
      if (character === '"') {
        this.index++;
        return;
      }
      if (character === "\\") {
        this.index++;
        const escaped = text[this.index];
        if (escaped === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(this.index + 1, this.index + 5))) throw stop;
          this.index += 4;
        } else if (escaped === undefined || !'"\\/bfnrt'.includes(escaped)) {
          throw stop;
        }
      }
      this.index++;
    }
  }

  /** An array or object: items between the brackets, separated by commas. */
  private readSequence(close: string, readItem: () => void): void {
    this.index++; // the opening bracket
    this.skipSpace();
    if (this.text[this.index] === close) {
      this.index++;
      return;
    }
    for (;;) {
      readItem();
      this.skipSpace();
      if (this.text[this.index] === ",") this.index++;
      else return this.expect(close);
    }
  }
}
