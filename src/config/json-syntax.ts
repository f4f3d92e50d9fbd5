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

/** A small recursive-descent JSON reader that only tracks how far the text is valid. */
function firstInvalidOffset(text: string): number | undefined {
  let index = 0;
  const number = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

  const skipSpace = (): void => {
    while (index < text.length && " \t\n\r".includes(text[index] as string)) index++;
  };
  const expect = (character: string): void => {
    skipSpace();
    if (text[index] !== character) throw stop;
    index++;
  };
  const readString = (): void => {
    index++; // the opening quote
    for (;;) {
      const character = text[index];
      if (character === undefined || character < " ") throw stop;
      if (character === '"') {
        index++;
        return;
      }
      if (character === "\\") {
        index++;
        const escaped = text[index];
        if (escaped === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(index + 1, index + 5))) throw stop;
          index += 4;
        } else if (escaped === undefined || !'"\\/bfnrt'.includes(escaped)) {
          throw stop;
        }
      }
      index++;
    }
  };
  const readSequence = (close: string, readItem: () => void): void => {
    index++; // the opening bracket
    skipSpace();
    if (text[index] === close) {
      index++;
      return;
    }
    for (;;) {
      readItem();
      skipSpace();
      if (text[index] === ",") index++;
      else return expect(close);
    }
  };
  const readValue = (): void => {
    skipSpace();
    const character = text[index];
    if (character === "{") {
      return readSequence("}", () => {
        skipSpace();
        if (text[index] !== '"') throw stop;
        readString();
        expect(":");
        readValue();
      });
    }
    if (character === "[") return readSequence("]", readValue);
    if (character === '"') return readString();
    number.lastIndex = index;
    if (number.test(text)) {
      index = number.lastIndex;
      return;
    }
    for (const word of ["true", "false", "null"]) {
      if (text.startsWith(word, index)) {
        index += word.length;
        return;
      }
    }
    throw stop;
  };

  try {
    readValue();
    skipSpace();
    return index < text.length ? index : undefined;
  } catch (error) {
    if (error === stop) return index;
    throw error;
  }
}
