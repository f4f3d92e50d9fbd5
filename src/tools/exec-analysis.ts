/**
 * Turns a shell command into the list of simple commands the shell would run ("segments"): split
 * on `;` `&` `&&` `||` `|` `|&` newlines and parentheses, with every command substitution,
 * process substitution and unquoted heredoc body analyzed too, recursively. Wrappers are looked
 * through, not trusted: `sh -c '...'`, `bash -lc "..."`, `eval`, `env [VAR=x] cmd`, `env -S`,
 * `nohup`, `timeout N`, `nice`, `time`, `exec`, `command`, `xargs`, `sudo`, `doas`, `su -c`,
 * `busybox`, `watch`, `flock`, `trap '...'`, `alias x='...'` and `find -exec`: each inner command
 * becomes a segment of its own.
 *
 * Pure: nothing here touches the system. The policy (exec-policy.ts) judges the segments.
 */
import { unwrap } from "./exec-wrappers.js";
import { tokenize, type Heredoc, type Token, type Word } from "./shell-lexer.js";

export interface Redirect {
  /** With its file descriptor: `>`, `2>`, `>>`, `&>`, `2>&`, `<<`, `<<<`, ... */
  operator: string;
  target: string;
  heredoc?: Heredoc;
}

export interface Segment {
  /**
   * The command as the shell sees it: quotes removed, words joined by one space, redirections at
   * the end (`> file`, `2>&1`). Wrappers are looked through; environment assignments and
   * privilege wrappers (`sudo`, `doas`, `su`) stay in front, since they change what runs.
   * Allow patterns must match this text in full.
   */
  text: string;
  /** The simple command as written. */
  raw: string;
  /** The innermost command's words, without assignments or wrappers. */
  argv: string[];
  /** Which of `argv` the shell computes at run time (variables, substitutions, globs, placeholders). */
  dynamic: boolean[];
  /** Arguments are appended at run time (`xargs cmd`), so `argv` is not the whole story. */
  appendsArguments: boolean;
  redirects: Redirect[];
  /**
   * `command`: something that runs. `wrapper`: a wrapper as written (`sh -c '...'`), kept so deny
   * patterns see it too; its inner commands are segments of their own.
   */
  role: "command" | "wrapper";
  /** A shell that reads its script from standard input (`sh`, `bash -s`, `sh -`). */
  readsScriptFromStdin: boolean;
  /** Identifies the pipeline this segment belongs to, and where in it. */
  pipeline: string;
  pipelinePosition: number;
  /** Its standard input comes from a pipe. */
  piped: boolean;
  /** Indices (in `CommandAnalysis.segments`) of the segments its substitutions produced. */
  substitutions: number[];
}

export interface CommandAnalysis {
  segments: Segment[];
  /** Every script analyzed: the command itself and each inner one (for whole-script rules). */
  scripts: string[];
  /** Why the command could not be followed; a non-empty list means it must be refused. */
  problems: string[];
}

/** Deeper nesting than this is refused rather than followed. */
const MAX_DEPTH = 12;

interface Context {
  depth: number;
  /** Assignments and privilege wrappers in force from outer layers. */
  prefix: string[];
  piped: boolean;
  /** Strings replaced at run time (`{}` under find -exec and xargs -I). */
  placeholders: string[];
}

interface SimpleCommand {
  words: Word[];
  redirects: { operator: string; target?: Word; heredoc?: Heredoc }[];
  pipeline: string;
  position: number;
}

/** Analyzes `command` into segments. Never throws: what it cannot follow ends up in `problems`. */
export function analyzeCommand(command: string): CommandAnalysis {
  const analysis: CommandAnalysis = { segments: [], scripts: [], problems: [] };
  analyzeScript(command, { depth: 0, prefix: [], piped: false, placeholders: [] }, analysis);
  return analysis;
}

/** The texts of the segments that run (wrappers looked through): what allow patterns must match. */
export function splitCommand(command: string): string[] {
  return analyzeCommand(command)
    .segments.filter((segment) => segment.role === "command")
    .map((segment) => segment.text);
}

function analyzeScript(script: string, context: Context, analysis: CommandAnalysis): void {
  if (context.depth > MAX_DEPTH) {
    analysis.problems.push(`commands nested more than ${MAX_DEPTH} levels deep`);
    return;
  }
  const scriptIndex = analysis.scripts.push(script) - 1;
  const lexed = tokenize(script);
  if (!lexed.ok) {
    analysis.problems.push(lexed.problem);
    return;
  }
  for (const command of groupCommands(lexed.tokens, scriptIndex)) {
    analyzeSimple(command, { ...context, piped: context.piped || command.position > 0 }, analysis, true);
  }
}

function groupCommands(tokens: Token[], scriptIndex: number): SimpleCommand[] {
  const commands: SimpleCommand[] = [];
  let pipeline = 0;
  let position = 0;
  let previous = "";
  /** Inside `case ... in`, before a pattern's `)`: the words are patterns, not a command. */
  let inCasePattern = false;
  let current: SimpleCommand = { words: [], redirects: [], pipeline: `${scriptIndex}.0`, position: 0 };
  let awaitingTarget: SimpleCommand["redirects"][number] | undefined;
  const flush = (): void => {
    if (current.words.length > 0 || current.redirects.length > 0) commands.push(current);
    current = { words: [], redirects: [], pipeline: `${scriptIndex}.${pipeline}`, position };
  };
  for (const token of tokens) {
    if (token.kind === "word") {
      const word = token.word;
      if (awaitingTarget) {
        awaitingTarget.target = word;
        awaitingTarget = undefined;
        continue;
      }
      if (inCasePattern && isUnquoted(word, "esac") && current.words.length === 1 && current.words[0] === CASE_MARKER) {
        inCasePattern = false;
        current.words = [];
      }
      current.words.push(word);
      // `case WORD in`: the header ends here and patterns follow (their words still expand).
      if (!word.quoted && word.value === "in" && current.words.length === 3 && isUnquoted(current.words[0], "case")) {
        flush();
        inCasePattern = true;
        current.words.push(CASE_MARKER);
      }
    } else if (token.kind === "redirect") {
      awaitingTarget = { operator: token.operator, heredoc: token.heredoc };
      current.redirects.push(awaitingTarget);
    } else if (inCasePattern && ["|", "(", ")", "\n"].includes(token.operator)) {
      // `a|b)` separates alternatives, `(a)` may open a pattern, newlines are layout; `)` ends it.
      if (token.operator === ")") {
        flush();
        inCasePattern = false;
      }
    } else {
      // Anything else ends a pattern: what follows is analyzed as commands, never swallowed.
      inCasePattern = false;
      awaitingTarget = undefined;
      const pipe = token.operator === "|" || token.operator === "|&";
      // `a | (b; c)`: the group still reads the pipe.
      const continuesPipe = pipe || (token.operator === "(" && (previous === "|" || previous === "|&"));
      if (pipe) position += 1;
      else if (!continuesPipe) {
        pipeline += 1;
        position = 0;
      }
      previous = token.operator;
      flush();
      if (token.operator === ";;" || token.operator === ";&" || token.operator === ";;&") {
        inCasePattern = true;
        current.words.push(CASE_MARKER);
      }
    }
  }
  flush();
  return commands.filter((command) => !(command.words.length === 1 && command.words[0] === CASE_MARKER && command.redirects.length === 0));
}

/** Stands first in a case pattern's words, so they are handled like a control header (data, not a command). */
const CASE_MARKER: Word = { value: "case", raw: "", dynamic: false, quoted: false, substitutions: [] };

function isUnquoted(word: Word | undefined, value: string): boolean {
  return word !== undefined && !word.quoted && word.value === value;
}

function analyzeSimple(command: SimpleCommand, context: Context, analysis: CommandAnalysis, withSubstitutions: boolean): void {
  const words = command.words.map((word) => withPlaceholders(word, context.placeholders));
  const substitutions: number[] = [];
  if (withSubstitutions) {
    const substitutionContext: Context = { depth: context.depth + 1, prefix: context.prefix, piped: false, placeholders: context.placeholders };
    const scripts = [
      ...words.flatMap((word) => word.substitutions),
      ...command.redirects.flatMap((redirect) => [...(redirect.target?.substitutions ?? []), ...(redirect.heredoc?.substitutions ?? [])]),
    ];
    for (const script of scripts) {
      const start = analysis.segments.length;
      analyzeScript(script, substitutionContext, analysis);
      for (let index = start; index < analysis.segments.length; index += 1) substitutions.push(index);
    }
  }

  const redirects: Redirect[] = command.redirects.map((redirect) => ({
    operator: redirect.operator,
    target: redirect.target?.value ?? "",
    ...(redirect.heredoc ? { heredoc: redirect.heredoc } : {}),
  }));
  const unwrapped = unwrap(words);
  const inner: Context = {
    depth: context.depth + 1,
    prefix: [...context.prefix, ...unwrapped.prefix],
    piped: context.piped,
    placeholders: [...context.placeholders, ...unwrapped.placeholders],
  };
  const base = {
    raw: [...command.words.map((word) => word.raw), ...command.redirects.map((redirect) => `${redirect.operator}${redirect.target?.raw ?? ""}`)].join(" "),
    redirects,
    pipeline: command.pipeline,
    pipelinePosition: command.position,
    piped: context.piped,
    substitutions,
  };

  if (unwrapped.layers > 0) {
    analysis.segments.push({
      ...base,
      text: render(context.prefix, words.map((word) => word.value), redirects),
      argv: words.map((word) => word.value),
      dynamic: words.map((word) => word.dynamic),
      appendsArguments: false,
      role: "wrapper",
      readsScriptFromStdin: false,
    });
  }
  for (const script of unwrapped.scripts) analyzeScript(script, inner, analysis);
  for (const extra of unwrapped.extraCommands) {
    analyzeSimple({ words: extra, redirects: [], pipeline: command.pipeline, position: command.position }, inner, analysis, false);
  }
  if (unwrapped.command === undefined) return;

  const prefix = [...context.prefix, ...unwrapped.prefix];
  const argv = unwrapped.command.map((word) => word.value);
  if (argv.length === 0 && prefix.length === context.prefix.length && redirects.length === 0) return;
  const readsScriptFromStdin = unwrapped.readsScriptFromStdin;
  analysis.segments.push({
    ...base,
    text: render(prefix, argv, redirects),
    argv,
    dynamic: unwrapped.command.map((word) => word.dynamic),
    appendsArguments: unwrapped.appendsArguments,
    role: "command",
    readsScriptFromStdin,
  });
  // A shell fed a heredoc or here-string runs it: that text is a script too.
  if (readsScriptFromStdin) {
    for (const redirect of redirects) {
      if (redirect.heredoc) analyzeScript(redirect.heredoc.body, inner, analysis);
      else if (redirect.operator.endsWith("<<<")) analyzeScript(redirect.target, inner, analysis);
    }
  }
}

function render(prefix: string[], argv: string[], redirects: Redirect[]): string {
  const redirections = redirects.map((redirect) =>
    /[<>]&$/.test(redirect.operator) && /^(\d+|-)$/.test(redirect.target) ? `${redirect.operator}${redirect.target}` : `${redirect.operator} ${redirect.target}`,
  );
  return [...prefix, ...argv, ...redirections].join(" ").trim();
}

function withPlaceholders(word: Word, placeholders: string[]): Word {
  if (word.dynamic || !placeholders.some((placeholder) => word.value.includes(placeholder))) return word;
  return { ...word, dynamic: true };
}

