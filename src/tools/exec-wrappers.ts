/**
 * Shell wrappers and how to see through them: `sh -c`, `env`, `sudo`, `xargs`, `timeout`, ... Each
 * wrapper's option syntax is spelled out, because a misparsed option argument (`nice -n 5 rm`)
 * would make the wrong word look like the command. Pure; used by exec-analysis.ts.
 */
import path from "node:path";
import type { Word } from "./shell-lexer.js";

export const SHELLS = new Set(["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "rbash", "lksh", "busybox-sh"]);

/** Words that open or close a shell construct; the command proper follows them. */
const RESERVED = new Set(["!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "fi", "done", "esac", "coproc"]);
/** Constructs whose words are data, not a command (`for x in a b`, `case $x in`). */
const CONTROL_HEADERS = new Set(["for", "select", "case"]);

interface WrapperSpec {
  kind: "prefix" | "shell" | "eval" | "su" | "watch" | "trap" | "alias";
  /** Options that take the next word (or the rest of the cluster) as their argument. */
  withArgument?: string[];
  /** Options whose argument is a script to analyze. */
  scriptOptions?: string[];
  /** Positional operands before the command (`timeout 5 cmd`, `chroot /dir cmd`). */
  operands?: number;
  /** `VAR=value` words may follow the options. */
  assignments?: boolean;
  /** Changes who runs the command: kept in the segment text so allow patterns must cover it. */
  privileged?: boolean;
  /** A lone `-` is an option (`env -` is `env -i`), not the command. */
  dashIsOption?: boolean;
}

const WRAPPERS: Record<string, WrapperSpec> = {
  env: { kind: "prefix", withArgument: ["-u", "--unset", "-C", "--chdir", "-P"], scriptOptions: ["-S", "--split-string"], assignments: true, dashIsOption: true },
  nohup: { kind: "prefix" },
  timeout: { kind: "prefix", withArgument: ["-s", "--signal", "-k", "--kill-after"], operands: 1 },
  nice: { kind: "prefix", withArgument: ["-n", "--adjustment"] },
  ionice: { kind: "prefix", withArgument: ["-c", "--class", "-n", "--classdata"] },
  time: { kind: "prefix", withArgument: ["-f", "--format", "-o", "--output"] },
  exec: { kind: "prefix", withArgument: ["-a"] },
  command: { kind: "prefix" },
  builtin: { kind: "prefix" },
  setsid: { kind: "prefix" },
  stdbuf: { kind: "prefix", withArgument: ["-i", "-o", "-e"] },
  chroot: { kind: "prefix", withArgument: ["--userspec", "--groups"], operands: 1, privileged: true },
  busybox: { kind: "prefix" },
  xargs: {
    kind: "prefix",
    withArgument: ["-a", "--arg-file", "-d", "--delimiter", "-E", "-L", "-n", "--max-args", "-P", "--max-procs", "-s", "--max-chars", "-I", "--process-slot-var"],
  },
  flock: { kind: "prefix", withArgument: ["-w", "--wait", "--timeout", "-E", "--conflict-exit-code"], scriptOptions: ["-c", "--command"], operands: 1 },
  sudo: {
    kind: "prefix",
    withArgument: ["-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-p", "--prompt", "-r", "--role", "-t", "--type", "-T", "--command-timeout", "-U", "--other-user", "-R", "--chroot", "-h", "--host"],
    assignments: true,
    privileged: true,
  },
  doas: { kind: "prefix", withArgument: ["-u", "-C"], privileged: true },
  su: { kind: "su", withArgument: ["-s", "--shell", "-g", "--group", "-G", "--supp-group", "-w", "--whitelist-environment"], scriptOptions: ["-c", "--command"], privileged: true },
  runuser: { kind: "su", withArgument: ["-u", "--user", "-s", "--shell", "-g", "--group", "-G", "--supp-group", "-w"], scriptOptions: ["-c", "--command"], privileged: true },
  eval: { kind: "eval" },
  watch: { kind: "watch", withArgument: ["-n", "--interval", "-q", "--equexit"] },
  trap: { kind: "trap" },
  alias: { kind: "alias" },
};
for (const shell of SHELLS) {
  WRAPPERS[shell] = { kind: "shell", withArgument: ["-o", "+o", "-O", "+O", "--rcfile", "--init-file"], scriptOptions: ["--command"] };
}

/**
 * Whether the word `value` names the long option `long` as GNU getopt_long would take it: the
 * whole name or any prefix of it (`--rec` for `--recursive`), with or without `=argument`. A
 * prefix another option of the tool shares is refused by the tool itself, so counting every
 * prefix errs on the side of the rule.
 */
export function isLongOption(value: string, long: string): boolean {
  if (!value.startsWith("--")) return false;
  const equals = value.indexOf("=");
  const name = equals === -1 ? value : value.slice(0, equals);
  return name.length > 2 && long.startsWith(name);
}

/** The option of `known` that `name` (a `--name` word without `=...`) stands for: itself, or the one it is a prefix of. */
function resolveLongOption(name: string, known: Iterable<string>): string {
  let match: string | undefined;
  for (const option of known) {
    if (option === name) return option;
    if (!match && isLongOption(name, option)) match = option;
  }
  return match ?? name;
}

export interface Unwrapped {
  prefix: string[];
  /** The innermost command's words; undefined when the command was wholly a script wrapper. */
  command: Word[] | undefined;
  layers: number;
  scripts: string[];
  extraCommands: Word[][];
  placeholders: string[];
  appendsArguments: boolean;
  readsScriptFromStdin: boolean;
}

/** How one wrapper layer ended the peeling: the result is complete, the words are the command, or the inner command to peel next. */
type Layer = "done" | "stop" | Word[];

/**
 * A wrapper that runs a script rather than a command (shell, eval, watch, trap, alias, su): the
 * script joins `result.scripts`; undefined for a prefix wrapper (env, sudo, xargs, …).
 */
function unwrapScriptWrapper(spec: WrapperSpec, rest: Word[], after: Word[], options: ParsedOptions, result: Unwrapped): Layer | undefined {
  const head = rest[0]!;
  if (spec.kind === "shell") {
    if (options.script !== undefined) {
      result.layers += 1;
      result.scripts.push(options.script);
      return "done";
    }
    if (options.flags.has("c")) {
      result.layers += 1;
      const [script, ...operands] = after;
      if (script === undefined || script.dynamic) result.command = [script ?? { ...head, value: `${head.value} -c (script from arguments)`, dynamic: true }];
      if (script) result.scripts.push(script.value);
      // `sh -c '"$0" "$@"' rm -rf /x` runs its operands: they are a command too.
      if (operands.length > 0) result.extraCommands.push(operands);
      return "done";
    }
    result.command = rest;
    result.readsScriptFromStdin = after.length === 0 || options.flags.has("s") || ["-", "/dev/stdin", "/proc/self/fd/0"].includes(after[0]?.value ?? "");
    return "done";
  }
  if (spec.kind === "eval" || spec.kind === "watch") {
    result.layers += 1;
    if (after.length > 0) result.scripts.push(after.map((word) => word.value).join(" "));
    else result.command = rest;
    return "done";
  }
  if (spec.kind === "trap") {
    result.layers += 1;
    const script = after[0];
    if (script && script.value !== "-" && !/^\d+$/.test(script.value)) result.scripts.push(script.value);
    result.command = [];
    return "done";
  }
  if (spec.kind === "alias") {
    result.layers += 1;
    for (const word of after) {
      const equals = word.value.indexOf("=");
      if (equals > 0) result.scripts.push(word.value.slice(equals + 1));
    }
    result.command = [];
    return "done";
  }
  if (spec.kind === "su") {
    // `su user -c '...'`: the script option may come after the user name.
    const script = suScript(rest);
    if (script === undefined) return "stop";
    result.layers += 1;
    result.prefix.push(...rest.filter((word) => word !== script.word && word !== script.option).map((word) => word.value));
    result.scripts.push(script.value);
    return "done";
  }
  return undefined;
}

/** A prefix wrapper: assignments and operands, then the command it runs (or a script option, as `flock FILE -c`). */
function unwrapPrefixWrapper(spec: WrapperSpec, name: string, rest: Word[], after: Word[], options: ParsedOptions, result: Unwrapped): Layer {
  let index = 0;
  if (spec.assignments) while (after[index] && isAssignment(after[index] as Word)) index += 1;
  index += Math.min(spec.operands ?? 0, after.length - index);
  // `flock FILE -c '...'`: a script option may follow the operands.
  const late = after[index];
  if (late && options.script === undefined && spec.scriptOptions?.some((option) => (option.startsWith("--") ? isLongOption(late.value, option) : late.value === option))) {
    const equals = late.value.indexOf("=");
    options.script = equals === -1 ? after[index + 1]?.value : late.value.slice(equals + 1);
    index += equals === -1 ? 2 : 1;
  }
  const consumed = [...rest.slice(0, options.next), ...after.slice(0, index)];
  if (options.script !== undefined) {
    result.layers += 1;
    result.prefix.push(...(spec.privileged ? consumed : consumed.filter(isAssignment)).map((word) => word.value));
    result.scripts.push([options.script, ...after.slice(index).map((word) => word.value)].join(" "));
    return "done";
  }
  const inner = after.slice(index);
  if (inner.length === 0) return "stop"; // `env` alone prints the environment: it is the command.
  result.layers += 1;
  // Options like `env -i` or `xargs -0` only change how the inner command runs; assignments and
  // privilege change what it does, so they stay in the text allow patterns must match.
  result.prefix.push(...(spec.privileged ? consumed : consumed.filter(isAssignment)).map((word) => word.value));
  if (name === "xargs") {
    result.appendsArguments = true;
    const replace = options.values.get("-I") ?? (options.flags.has("i") ? "{}" : undefined);
    if (replace) result.placeholders.push(replace);
  }
  return inner;
}

/** Peels wrappers off a simple command, collecting inner scripts and commands. */
export function unwrap(words: Word[]): Unwrapped {
  const result: Unwrapped = { prefix: [], command: undefined, layers: 0, scripts: [], extraCommands: [], placeholders: [], appendsArguments: false, readsScriptFromStdin: false };
  let rest = words;
  for (let guard = 0; guard < 64; guard += 1) {
    while (rest[0] && !rest[0].quoted && RESERVED.has(rest[0].value)) rest = rest.slice(1);
    if (rest[0] && !rest[0].quoted && rest[0].value === "function") rest = rest.slice(2);
    if (rest[0] && !rest[0].quoted && CONTROL_HEADERS.has(rest[0].value)) {
      result.command = [];
      return result;
    }
    while (rest[0] && isAssignment(rest[0])) {
      result.prefix.push(rest[0].value);
      rest = rest.slice(1);
    }
    const head = rest[0];
    const spec = head && !head.dynamic ? WRAPPERS[path.posix.basename(head.value)] : undefined;
    if (!head || !spec) break;
    const name = path.posix.basename(head.value);
    const options = parseOptions(rest, spec);
    const after = rest.slice(options.next);

    const outcome = unwrapScriptWrapper(spec, rest, after, options, result) ?? unwrapPrefixWrapper(spec, name, rest, after, options, result);
    if (outcome === "done") return result;
    if (outcome === "stop") break;
    rest = outcome;
  }
  if (rest[0] && !rest[0].dynamic && path.posix.basename(rest[0].value) === "find") {
    result.extraCommands.push(...findExecCommands(rest));
    if (result.extraCommands.length > 0) result.placeholders.push("{}");
  }
  result.command = rest;
  return result;
}

interface ParsedOptions {
  /** Index of the first word after the options. */
  next: number;
  /** Single-letter flags seen in short clusters (`-lc` gives l and c). */
  flags: Set<string>;
  /** Argument of a script option (`env -S '...'`, `su -c '...'`). */
  script: string | undefined;
  values: Map<string, string>;
}

function parseOptions(words: Word[], spec: WrapperSpec): ParsedOptions {
  const withArgument = new Set(spec.withArgument ?? []);
  const scriptOptions = new Set(spec.scriptOptions ?? []);
  const parsed: ParsedOptions = { next: 1, flags: new Set(), script: undefined, values: new Map() };
  const take = (option: string, value: string | undefined): void => {
    if (value === undefined) return;
    if (scriptOptions.has(option)) parsed.script = value;
    else parsed.values.set(option, value);
  };
  while (parsed.next < words.length) {
    const word = words[parsed.next] as Word;
    const value = word.value;
    if (value === "--") {
      parsed.next += 1;
      break;
    }
    if (value === "-" && spec.dashIsOption) {
      parsed.next += 1;
      continue;
    }
    if (word.dynamic || value.length < 2 || !/^[-+]/.test(value)) break;
    parsed.next += 1;
    if (value.startsWith("--")) {
      const equals = value.indexOf("=");
      // `--spl` is `--split-string` to env, as to every getopt_long tool.
      const option = resolveLongOption(equals === -1 ? value : value.slice(0, equals), [...scriptOptions, ...withArgument]);
      if (equals !== -1) take(option, value.slice(equals + 1));
      else if (withArgument.has(option) || scriptOptions.has(option)) take(option, words[parsed.next++]?.value);
      continue;
    }
    // A short cluster: `-lc`, `-n10`, `-o pipefail`, `-S'rm -rf /'`.
    const sign = value[0] as string;
    for (let index = 1; index < value.length; index += 1) {
      const option = `${sign}${value[index]}`;
      if (withArgument.has(option) || scriptOptions.has(option)) {
        const attached = value.slice(index + 1);
        take(option, attached !== "" ? attached : words[parsed.next++]?.value);
        break;
      }
      if (sign === "-") parsed.flags.add(value[index] as string);
    }
  }
  return parsed;
}

/** The `-c` script of `su`/`runuser`, wherever it stands. */
function suScript(words: Word[]): { value: string; word: Word; option?: Word } | undefined {
  for (let index = 1; index < words.length; index += 1) {
    const word = words[index] as Word;
    if (word.value === "--") return undefined;
    const equals = word.value.indexOf("=");
    if (equals !== -1 && isLongOption(word.value, "--command")) return { value: word.value.slice(equals + 1), word };
    const next = words[index + 1];
    if ((word.value === "-c" || isLongOption(word.value, "--command")) && next) return { value: next.value, word: next, option: word };
  }
  return undefined;
}

/** `find ... -exec cmd {} ;` and friends: the commands find will run. */
function findExecCommands(words: Word[]): Word[][] {
  const commands: Word[][] = [];
  for (let index = 1; index < words.length; index += 1) {
    if (!["-exec", "-execdir", "-ok", "-okdir"].includes((words[index] as Word).value)) continue;
    const body: Word[] = [];
    for (index += 1; index < words.length; index += 1) {
      const word = words[index] as Word;
      if (word.value === ";" || (word.value === "+" && body.length > 0)) break;
      body.push(word);
    }
    if (body.length > 0) commands.push(body);
  }
  return commands;
}

function isAssignment(word: Word): boolean {
  return /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/.test(word.raw);
}
