/**
 * Turns zod issues into lines a person editing the config file can act on:
 * `<path>: <what was expected>, got <what was found>`.
 */
import { z } from "zod";

type Issue = z.core.$ZodIssue;
type PathKey = PropertyKey;

/** `agent.maxIterations`, `providers["my provider"].apiKey`, `channels.telegram.allowFrom[0]`. */
export function formatPath(path: readonly PathKey[]): string {
  let text = "";
  for (const key of path) {
    if (typeof key === "number") text += `[${key}]`;
    else if (typeof key === "string" && /^[A-Za-z_$][\w$]*$/.test(key)) text += text === "" ? key : `.${key}`;
    else text += `[${JSON.stringify(String(key))}]`;
  }
  return text;
}

/**
 * `schema.safeParse(value)`, with the issues of a failure carrying the input they found (what
 * {@link describeIssue} shows). The fast parse first: `reportInput` makes every parse about ten times
 * slower, and on a hot path (a POST, a webhook) nearly every value is valid.
 */
export function safeParseReporting<Schema extends z.ZodType>(schema: Schema, value: unknown): z.ZodSafeParseResult<z.output<Schema>> {
  const result = schema.safeParse(value);
  return result.success ? result : schema.safeParse(value, { reportInput: true });
}

/** Options of {@link describeIssue}. */
export interface DescribeIssueOptions {
  /** The schema that was parsed, to suggest the field an unknown one was probably meant to be. */
  schema?: z.ZodType;
  /** Leave out the value that was found, for fields that hold secrets. */
  hideInput?: boolean;
}

/** Describes one issue, without its path. Needs issues parsed with `reportInput: true` to say what was found. */
export function describeIssue(issue: Issue, options: DescribeIssueOptions = {}): string {
  const input = (issue as { input?: unknown }).input;
  const got = input === undefined || options.hideInput ? "" : `, got ${describeValue(input)}`;
  switch (issue.code) {
    case "invalid_type":
      if (input === undefined && !options.hideInput) return `expected ${article(issue.expected)}, but it is missing`;
      return `expected ${article(issue.expected)}${got}`;
    case "too_big":
    case "too_small":
      return `expected ${describeBound(issue)}${got}`;
    case "invalid_format":
      return `expected ${describeFormat(issue)}${got}`;
    case "invalid_value":
      return issue.values.length === 1
        ? `expected ${describeValue(issue.values[0])}${got}`
        : `expected one of ${issue.values.map((value) => describeValue(value)).join(", ")}${got}`;
    case "unrecognized_keys":
      return describeUnknownKeys(issue.keys, options.schema ? fieldsAt(options.schema, issue.path) : []);
    case "invalid_key": {
      const reasons = issue.issues.map((inner) => describeIssue(inner, { hideInput: options.hideInput }));
      return `invalid name: ${reasons.join("; ")}`;
    }
    case "not_multiple_of":
      return `expected a multiple of ${String(issue.divisor)}${got}`;
    default:
      return issue.message;
  }
}

function describeUnknownKeys(keys: readonly string[], known: readonly string[]): string {
  const names = keys.map((key) => {
    const suggestion = closest(key, known);
    return suggestion ? `"${key}" (did you mean "${suggestion}"?)` : `"${key}"`;
  });
  return `unknown field${keys.length === 1 ? "" : "s"} ${names.join(", ")}`;
}

const articles: Record<string, string> = {
  int: "an integer",
  number: "a number",
  string: "a string",
  boolean: "true or false",
  array: "an array",
  object: "an object",
  record: "an object",
};

function article(expected: string): string {
  return articles[expected] ?? `a ${expected}`;
}

/** A value from the config, shown short: strings quoted and cut, containers named. */
function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  return String(value);
}

function describeBound(issue: z.core.$ZodIssueTooBig | z.core.$ZodIssueTooSmall): string {
  const big = issue.code === "too_big";
  const limit = Number(big ? issue.maximum : issue.minimum);
  const inclusive = issue.inclusive !== false;
  const [noun, plural] = issue.origin === "string" ? ["character", "characters"] : ["item", "items"];
  if (issue.origin === "string" || issue.origin === "array" || issue.origin === "set") {
    const count = inclusive ? limit : big ? limit - 1 : limit + 1;
    return `${big ? "at most" : "at least"} ${count} ${count === 1 ? noun : plural}`;
  }
  const operator = big ? (inclusive ? "<=" : "<") : inclusive ? ">=" : ">";
  return `a number ${operator} ${limit}`;
}

function describeFormat(issue: z.core.$ZodIssueInvalidStringFormat): string {
  if (issue.format === "url") return "a URL";
  if (issue.format === "regex") {
    // A message written in the schema says what is meant better than the pattern does.
    if (!issue.message.startsWith("Invalid")) return issue.message.replace(/^expected /, "");
    return `a string matching ${issue.pattern ?? "the pattern"}`;
  }
  return `a valid ${issue.format}`;
}

/** The field names the schema allows at `path`, when `path` leads to an object. */
function fieldsAt(schema: z.ZodType, path: readonly PathKey[]): string[] {
  let node: unknown = schema;
  for (let depth = 0; ; depth++) {
    while (node instanceof z.ZodOptional || node instanceof z.ZodDefault || node instanceof z.ZodPrefault || node instanceof z.ZodNullable) {
      node = node.unwrap();
    }
    if (depth === path.length) break;
    const key = path[depth];
    if (node instanceof z.ZodObject && typeof key === "string") node = node.shape[key];
    else if (node instanceof z.ZodRecord) node = node.valueType;
    else if (node instanceof z.ZodArray) node = node.element;
    else return [];
  }
  return node instanceof z.ZodObject ? Object.keys(node.shape) : [];
}

/** The known name a mistyped one most likely meant: same letters in another case, or one or two edits away. */
function closest(name: string, known: readonly string[]): string | undefined {
  const sameLetters = known.find((candidate) => candidate.toLowerCase() === name.toLowerCase());
  if (sameLetters) return sameLetters;
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance <= Math.min(2, Math.max(1, Math.floor(candidate.length / 3))) && (!best || distance < best.distance)) best = { candidate, distance };
  }
  return best?.candidate;
}

/** Edits (insert, delete, replace, swap two neighbours) that turn `from` into `to`. */
function editDistance(from: string, to: string): number {
  const rows = Array.from({ length: from.length + 1 }, (_, row) => Array.from({ length: to.length + 1 }, (_, column) => (row === 0 ? column : column === 0 ? row : 0)));
  const at = (row: number, column: number): number => rows[row]?.[column] ?? 0;
  for (let row = 1; row <= from.length; row++) {
    for (let column = 1; column <= to.length; column++) {
      const cost = from[row - 1] === to[column - 1] ? 0 : 1;
      let distance = Math.min(at(row - 1, column) + 1, at(row, column - 1) + 1, at(row - 1, column - 1) + cost);
      if (row > 1 && column > 1 && from[row - 1] === to[column - 2] && from[row - 2] === to[column - 1]) {
        distance = Math.min(distance, at(row - 2, column - 2) + 1);
      }
      (rows[row] as number[])[column] = distance;
    }
  }
  return at(from.length, to.length);
}
