/**
 * What the exec tool refuses to run. Built-in deny rules (always on), deny patterns from config,
 * and optional allow patterns that EVERY segment must match in full. Segments come from
 * exec-analysis.ts: the command split on `;` `&` `&&` `||` `|` newlines and substitutions, with
 * wrappers (`sh -c`, `bash -lc`, `env`, `sudo`, `xargs`, `eval`, ...) looked through.
 *
 * Be honest about what this is: a pattern filter, NOT a sandbox. It stops the accidents and the
 * well-known attack strings, but a shell has too many ways to run code for a filter to see them
 * all (`python -c`, `awk 'BEGIN{system(...)}'`, a script written to disk and then run, ...). The
 * real wall is running commands under bubblewrap (exec-sandbox.ts) as an unprivileged user, and
 * allow patterns for bots that only need a few commands.
 */
import path from "node:path";
import { ConfigError } from "../errors.js";
import { analyzeCommand, type CommandAnalysis, type Segment } from "./exec-analysis.js";
import { SHELLS, isLongOption } from "./exec-wrappers.js";

export interface DenyRule {
  /** Short name shown in refusals, e.g. "recursive rm". */
  name: string;
  /** Whether `segment` breaks the rule; `analysis` gives access to related segments. */
  matches(segment: Segment, analysis: CommandAnalysis): boolean;
}

export interface ExecPolicy {
  /** Regular expressions from config, refused when found anywhere in a segment. */
  denyPatterns: RegExp[];
  /** Anchored regular expressions; empty means every command not denied may run. */
  allowPatterns: RegExp[];
}

export type PolicyVerdict =
  | { allowed: true; analysis: CommandAnalysis }
  | { allowed: false; segment: string; rule: string; kind: "deny" | "allow" | "unparseable" };

const DOWNLOADERS = new Set(["curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-request"]);
const INTERPRETER = /^(python[\d.]*|perl[\d.]*|ruby[\d.]*|node|nodejs|deno|bun|php[\d.]*|lua[\d.]*|tclsh|Rscript)$/;
const OUTPUT_REDIRECT = /(^|\d|&)(>|>>|>\||>&)$|<>$/;
const DEVICE = /^\/dev\/(sd|hd|vd|xvd|nvme|mmcblk|loop|dm-|md|sr|nbd|mapper\/|disk\/|mem$|kmem$|port$)/;
const HARMLESS_DEVICES = new Set(["/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/tty"]);
const PROC_SECRETS = /\/proc\/[^/\s]+\/(task\/[^/\s]+\/)?(environ|mem)\b/;
const SHUTDOWN_VERBS = new Set(["poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "hybrid-sleep", "rescue", "emergency", "isolate", "soft-reboot"]);

function commandName(segment: Segment): string {
  const first = segment.argv[0];
  return first === undefined || segment.dynamic[0] ? "" : path.posix.basename(first);
}

/** Arguments before `--`, where an option could hide. */
function optionArguments(segment: Segment): { value: string; dynamic: boolean }[] {
  const end = segment.argv.indexOf("--");
  return segment.argv.slice(1, end === -1 ? undefined : end).map((value, index) => ({ value, dynamic: segment.dynamic[index + 1] ?? false }));
}

/** An option given short (in any cluster: `-rf`, `-fR`) or long, whole or abbreviated (`--rec`). */
function hasOption(segment: Segment, letters: string[], long: string): boolean {
  return optionArguments(segment).some(
    ({ value }) => isLongOption(value, long) || (/^-[^-]/.test(value) && letters.some((letter) => value.slice(1).includes(letter))),
  );
}

function outputTargets(segment: Segment): string[] {
  return segment.redirects.filter((redirect) => OUTPUT_REDIRECT.test(redirect.operator)).map((redirect) => path.posix.normalize(redirect.target));
}

/** Files a command writes to by its arguments: every operand of tee/truncate, the last of cp/mv/install/ln. */
function writtenOperands(segment: Segment): string[] {
  const name = commandName(segment);
  const operands = segment.argv.slice(1).filter((value) => !value.startsWith("-")).map((value) => path.posix.normalize(value));
  if (name === "tee" || name === "truncate" || name === "shred") return operands;
  if (name === "sed" && segment.argv.some((value) => /^-[^-]*i/.test(value) || isLongOption(value, "--in-place"))) return operands;
  if (["cp", "mv", "install", "ln", "rsync"].includes(name)) return operands.slice(-1);
  return [];
}

function isShell(name: string): boolean {
  return SHELLS.has(name);
}

/** A command that runs the program text it reads from standard input. */
function runsStdin(segment: Segment): boolean {
  const name = commandName(segment);
  if (isShell(name)) return segment.readsScriptFromStdin;
  if (!INTERPRETER.test(name)) return false;
  const operands = segment.argv.slice(1).filter((value) => !value.startsWith("-") || value === "-");
  return operands.length === 0 || operands[0] === "-";
}

function isDownloader(segment: Segment | undefined): boolean {
  return segment !== undefined && DOWNLOADERS.has(commandName(segment));
}

/** The built-in deny rules. They are always on; config can only add to them. */
export const BUILTIN_DENY_RULES: readonly DenyRule[] = [
  {
    name: "recursive rm",
    matches: (segment) => commandName(segment) === "rm" && hasOption(segment, ["r", "R"], "--recursive"),
  },
  {
    // `rm $flags /x` or `... | xargs rm` could be `rm -rf /x` at run time; `rm -- "$f"` is fine.
    name: "rm with options computed at run time",
    matches: (segment) =>
      commandName(segment) === "rm" &&
      ((segment.appendsArguments && !segment.argv.includes("--")) || optionArguments(segment).some(({ value, dynamic }) => dynamic && /^[$`]/.test(value))),
  },
  { name: "recursive delete (find -delete)", matches: (segment) => commandName(segment) === "find" && segment.argv.includes("-delete") },
  { name: "filesystem format (mkfs)", matches: (segment) => /^(mkfs(\..+)?|mke2fs|mkswap|wipefs)$/.test(commandName(segment)) },
  {
    name: "dd to a device",
    matches: (segment) =>
      commandName(segment) === "dd" &&
      segment.argv.some((value) => value.startsWith("of=") && value.slice(3).startsWith("/dev/") && !HARMLESS_DEVICES.has(path.posix.normalize(value.slice(3)))),
  },
  {
    name: "write to a block device",
    matches: (segment) => [...outputTargets(segment), ...writtenOperands(segment)].some((target) => DEVICE.test(target) || target === "/proc/sysrq-trigger"),
  },
  {
    name: "write into /etc",
    matches: (segment) => [...outputTargets(segment), ...writtenOperands(segment)].some((target) => target === "/etc" || target.startsWith("/etc/")),
  },
  {
    name: "shutdown or reboot",
    matches: (segment) => {
      const name = commandName(segment);
      if (["shutdown", "reboot", "halt", "poweroff"].includes(name)) return true;
      if (name === "init" || name === "telinit") return segment.argv.slice(1).some((value) => /^[06sS]$/.test(value));
      if (name === "systemctl") return segment.argv.slice(1).some((value) => SHUTDOWN_VERBS.has(value));
      return false;
    },
  },
  {
    name: "recursive chmod/chown on a system directory",
    matches: (segment) =>
      ["chmod", "chown", "chgrp"].includes(commandName(segment)) &&
      hasOption(segment, ["R"], "--recursive") &&
      segment.argv.slice(1).some((value) => !value.startsWith("-") && /^\/[^/]*\/?$/.test(path.posix.normalize(value))),
  },
  {
    name: "pipe into a shell",
    matches: (segment) => segment.piped && isShell(commandName(segment)) && segment.readsScriptFromStdin,
  },
  {
    name: "downloaded code executed",
    matches: (segment, analysis) => {
      const name = commandName(segment);
      const runsCode = isShell(name) || INTERPRETER.test(name) || name === "source" || name === "." || name === "eval";
      if (!runsCode) return false;
      if (segment.substitutions.some((index) => isDownloader(analysis.segments[index]))) return true;
      if (!segment.piped || !runsStdin(segment)) return false;
      return analysis.segments.some(
        (other) => other.pipeline === segment.pipeline && other.pipelinePosition < segment.pipelinePosition && isDownloader(other),
      );
    },
  },
  {
    // Without bubblewrap the gateway's own process is visible: /proc/$PPID/environ holds its API keys.
    name: "read a process environment or memory",
    matches: (segment) => [...segment.argv.slice(1), ...segment.redirects.map((redirect) => redirect.target)].some((value) => PROC_SECRETS.test(value)),
  },
  {
    // `$cmd -rf /x`, `$(echo rm) ...`, `/bin/r? ...`, `{rm,-rf,/x}`: the filter cannot know what runs.
    name: "command name computed at run time",
    matches: (segment) => segment.role === "command" && segment.argv.length > 0 && segment.dynamic[0] === true,
  },
];

const NAME = "[^\\s;&|(){}<>'\"`$\\\\]+";
/** `name() { body }`, `name() ( body )`, `function name { body }`. */
const FUNCTION_DEFINITION = new RegExp(String.raw`(?:function\s+(${NAME})\s*(?:\(\s*\))?|(${NAME})\s*\(\s*\))\s*(?:\{([^}]*)\}|\(([^)]*)\))`, "g");

/** A function that calls itself in the background: `:(){ :|:& };:` and renamed variants. */
export function isForkBomb(script: string): boolean {
  for (const match of script.matchAll(FUNCTION_DEFINITION)) {
    const name = (match[1] ?? match[2]) as string;
    const body = (match[3] ?? match[4]) as string;
    if (!/(^|[^&>])&($|[^&>])/.test(body)) continue;
    const call = new RegExp(`(^|[\\s;&|(){}])${escapeRegExp(name)}(?=$|[\\s;&|(){}])`);
    if (call.test(body)) return true;
  }
  return false;
}

/**
 * Compiles config patterns. Allow patterns are anchored here (`^(?:...)$`), so `ls` allows `ls`
 * and not `ls; rm`. A pattern that is not a valid regular expression is a configuration error.
 */
export function compileExecPolicy(options: { denyPatterns?: string[]; allowPatterns?: string[] }): ExecPolicy {
  const compile = (pattern: string, field: string, anchored: boolean): RegExp => {
    try {
      return new RegExp(anchored ? `^(?:${pattern})$` : pattern);
    } catch (error) {
      throw new ConfigError(`tools.exec.${field}: "${pattern}" is not a valid regular expression`, `tools.exec.${field}`, { cause: error });
    }
  };
  return {
    denyPatterns: (options.denyPatterns ?? []).map((pattern) => compile(pattern, "denyPatterns", false)),
    allowPatterns: (options.allowPatterns ?? []).map((pattern) => compile(pattern, "allowPatterns", true)),
  };
}

/** Judges `command`: the first segment that breaks a rule, or allowed with the analysis. */
export function checkCommand(command: string, policy: ExecPolicy): PolicyVerdict {
  const analysis = analyzeCommand(command);
  const [problem] = analysis.problems;
  if (problem !== undefined) return { allowed: false, segment: shorten(command), rule: `the command cannot be analyzed (${problem})`, kind: "unparseable" };
  const bomb = analysis.scripts.find(isForkBomb);
  if (bomb !== undefined) return { allowed: false, segment: shorten(bomb), rule: "fork bomb", kind: "deny" };

  for (const segment of analysis.segments) {
    const rule = BUILTIN_DENY_RULES.find((candidate) => candidate.matches(segment, analysis));
    if (rule) return { allowed: false, segment: shorten(segment.text), rule: rule.name, kind: "deny" };
    const pattern = policy.denyPatterns.find((candidate) => candidate.test(segment.text) || candidate.test(segment.raw));
    if (pattern) return { allowed: false, segment: shorten(segment.text), rule: `deny pattern /${pattern.source}/`, kind: "deny" };
  }
  if (policy.allowPatterns.length > 0) {
    for (const segment of analysis.segments) {
      // Redirections of a compound command (`done < file`) have no command of their own to allow.
      if (segment.role !== "command" || segment.text === "" || (segment.argv.length === 0 && segment.text.startsWith("<"))) continue;
      if (!policy.allowPatterns.some((pattern) => pattern.test(segment.text))) {
        return { allowed: false, segment: shorten(segment.text), rule: "no allow pattern matches it", kind: "allow" };
      }
    }
  }
  return { allowed: true, analysis };
}

function shorten(text: string): string {
  const oneLine = text.replace(/\s+/g, " ").trim();
  return oneLine.length > 200 ? `${oneLine.slice(0, 200)}…` : oneLine;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
