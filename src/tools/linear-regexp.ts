/**
 * Ajv's `pattern` and `patternProperties` on a linear-time engine (re2js, a pure-JS port of RE2):
 * a tool schema from an MCP server is untrusted, and a pattern such as `^(a+)+$` run by the
 * backtracking RegExp on 40 characters would take hours. RE2 answers in time linear in the
 * subject, whatever the pattern. It has no lookaround and no backreferences: a schema that uses
 * them fails to compile, and its tool is left out with that reason.
 *
 * JSON Schema patterns are ECMA-262; the one spelling RE2 writes differently, `\uXXXX` (and
 * `\u{X...}`), is turned into RE2's `\x{XXXX}`. Patterns longer than {@link MAX_PATTERN_LENGTH}
 * are refused, which also bounds what compiling one costs.
 */
import { RE2JS } from "re2js";
import type { RegExpEngine } from "ajv/dist/types/index.js";

/** Longest pattern a tool schema may use. */
export const MAX_PATTERN_LENGTH = 1_000;

/** A pattern the linear-time engine cannot take: the schema (and its tool) is refused with this message. */
export class UnsupportedPatternError extends Error {
  override name = "UnsupportedPatternError";
}

function translate(pattern: string): string {
  return pattern.replace(/(?<!\\)((?:\\\\)*)\\u(?:\{([0-9a-fA-F]{1,6})\}|([0-9a-fA-F]{4}))/g, (_all, backslashes: string, braced?: string, plain?: string) => `${backslashes}\\x{${braced ?? plain}}`);
}

/** Ajv's `code.regExp`: `test` searches anywhere in the string, as RegExp's does. */
export const linearRegExp: RegExpEngine = Object.assign(
  (pattern: string) => {
    if (pattern.length > MAX_PATTERN_LENGTH) throw new UnsupportedPatternError(`a pattern of ${pattern.length} characters (at most ${MAX_PATTERN_LENGTH})`);
    let compiled: RE2JS;
    try {
      compiled = RE2JS.compile(translate(pattern));
    } catch (error) {
      throw new UnsupportedPatternError(`pattern ${JSON.stringify(pattern.slice(0, 80))} is not one the linear-time engine takes (no lookaround, no backreferences): ${(error as Error).message}`);
    }
    return { test: (subject: string) => compiled.matcher(subject).find() };
  },
  { code: "linearRegExp" },
);
