/**
 * The `exec` tool: runs a shell command in the workspace.
 *
 * Walls, from weakest to strongest:
 * - the policy filter (exec-policy.ts): built-in deny rules, config deny patterns, optional allow
 *   patterns for every segment. A pattern filter is NOT a sandbox; see that file.
 * - a minimal environment: PATH, HOME (the workspace), LANG, TERM=dumb and the configured extras.
 *   Nothing else of the gateway's environment is inherited, so API keys and tokens stay out.
 * - a time limit that kills the whole process group, background children included, and a cap on
 *   the output that keeps its head and tail. Without the sandbox's PID namespace, a child that left
 *   the group (`setsid`) is found by a marker variable in its environment and killed too.
 * - bubblewrap isolation (exec-sandbox.ts), required: with no working sandbox every command is
 *   refused, unless the operator set `tools.exec.sandbox: "none"`.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { z } from "zod";
import { ToolError } from "../errors.js";
import { checkCommand, compileExecPolicy } from "./exec-policy.js";
import {
  brokenSandboxMessage,
  buildBwrapArgs,
  chooseSandbox,
  findExecutable,
  probeBwrap,
  probeEtcLayout,
  probeRootLayout,
  sandboxIdentity,
  type SandboxFile,
  type SandboxMode,
  writeSandboxFiles,
} from "./exec-sandbox.js";
import { defineTool, type Tool } from "./tool.js";

const parameters = z.object({
  command: z.string().min(1).max(100_000).describe("Shell command, run with /bin/sh -c in the workspace directory."),
});

export interface ExecToolOptions {
  /** The command and everything it started are killed after this long (30 s; 300 s for subagents). */
  timeoutSeconds: number;
  /** Output beyond this keeps its head and its tail. */
  maxOutputChars: number;
  /** Extra regular expressions refused in any segment, on top of the built-in rules. */
  denyPatterns?: string[];
  /** When non-empty, every segment must fully match one of these regular expressions. */
  allowPatterns?: string[];
  /** `auto` (default) and `bwrap`: bubblewrap, every command refused when it cannot run; `none`: filter only (explicit opt-out). */
  sandbox?: SandboxMode;
  /** Variables added to the minimal environment (PATH, HOME, LANG, TERM), e.g. GIT_AUTHOR_NAME. */
  env?: Record<string, string>;
  /** Looks up `bwrap`; injectable for tests. */
  findExecutable?: (name: string) => string | undefined;
}

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/** How long to wait for the pipes to drain once the shell is gone and its group killed. */
const DRAIN_GRACE_MS = 2_000;

/** Throws ConfigError when a configured pattern is not a valid regular expression. */
export function createExecTool(options: ExecToolOptions): Tool<typeof parameters> {
  const policy = compileExecPolicy(options);
  const choice = chooseSandbox(options.sandbox ?? "auto", options.findExecutable ?? findExecutable);
  const layout = choice.kind === "bwrap" ? [...probeRootLayout(), ...probeEtcLayout()] : [];
  let usable: Promise<{ ok: true } | { ok: false; message: string }> | undefined;

  return defineTool({
    name: "exec",
    description:
      "Run a shell command in the workspace directory and get its output and exit code. " +
      `It is killed after ${options.timeoutSeconds} s, with everything it started; background processes are stopped when it ends. ` +
      "Destructive commands (rm -r, mkfs, dd to devices, shutdown, piping downloads into a shell, ...) are refused" +
      (policy.allowPatterns.length > 0 ? ", and only commands on the configured allow list may run." : "."),
    parameters,
    async execute(args, context) {
      const verdict = checkCommand(args.command, policy);
      if (!verdict.allowed) {
        const why = verdict.kind === "allow" ? "matches no allow pattern" : verdict.kind === "unparseable" ? `cannot be checked: ${verdict.rule}` : `matches the deny rule "${verdict.rule}"`;
        throw new ToolError(
          `command refused: segment \`${verdict.segment}\` ${why}`,
          verdict.kind === "allow"
            ? `Only commands matching the configured allow patterns may run (${policy.allowPatterns.map((pattern) => pattern.source).join(", ")}); use one of those or another tool.`
            : "This is blocked on purpose; do not try to get around it. Do the task another way, or ask the user to do this step.",
        );
      }
      const refusedHint = 'tell the user exec needs bubblewrap (or an explicit tools.exec.sandbox "none"); do the task with the other tools.';
      if (choice.kind === "unavailable") return `Error: ${choice.message}. Next: ${refusedHint}`;

      let file = "/bin/sh";
      let argv = ["-c", args.command];
      let files: SandboxFile[] = [];
      if (choice.kind === "bwrap") {
        usable ??= probeBwrap(choice.bwrapPath, context.workspace, layout);
        const probe = await usable;
        if (!probe.ok) return `Error: ${brokenSandboxMessage(probe.message)}. Next: ${refusedHint}`;
        file = choice.bwrapPath;
        files = sandboxIdentity(context.workspace);
        argv = buildBwrapArgs({ workspace: context.workspace, command: args.command, layout, files });
      }

      const result = await runProcess({
        file,
        args: argv,
        cwd: context.workspace,
        env: minimalEnvironment(context.workspace, options.env),
        timeoutMs: options.timeoutSeconds * 1000,
        signal: context.signal,
        maxOutputChars: options.maxOutputChars,
        files,
      });
      if (result.aborted) throw new ToolError("the command was cancelled; its process group was killed");
      const output = formatOutput(result.stdout, result.stderr, options.maxOutputChars);
      if (result.timedOut) {
        return `Error: the command timed out after ${options.timeoutSeconds} s and its whole process group was killed. Next: make it faster, run it in smaller steps, or avoid commands that wait for input.\n${output}`;
      }
      const status = result.exitCode !== null ? `[exit code ${result.exitCode}]` : `[killed by ${result.exitSignal}]`;
      return `${output}\n${status}`;
    },
  });
}

/** PATH, HOME, LANG and TERM, plus what was configured; never the gateway's own variables. */
export function minimalEnvironment(workspace: string, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH || DEFAULT_PATH, HOME: workspace, LANG: process.env.LANG || "C.UTF-8", TERM: "dumb", ...extra };
}

/** stdout then stderr, sharing the character budget; each keeps its head and tail when cut. */
function formatOutput(stdout: BoundedText, stderr: BoundedText, maxChars: number): string {
  if (stdout.total === 0 && stderr.total === 0) return "(no output)";
  const stderrBudget = stdout.total === 0 ? maxChars : Math.min(stderr.total, Math.floor(maxChars / 2));
  const stdoutBudget = maxChars - stderrBudget;
  const sections: string[] = [];
  if (stdout.total > 0) sections.push(stdout.render(stdoutBudget).replace(/\n$/, ""));
  if (stderr.total > 0) sections.push(`[stderr]\n${stderr.render(stderrBudget).replace(/\n$/, "")}`);
  return sections.join("\n");
}

/** Keeps the head and the tail of `text`, with a marker saying how many characters were cut between them. */
export function capOutput(text: string, maxChars: number): string {
  const bounded = new BoundedText(maxChars);
  bounded.append(text);
  return bounded.render(maxChars);
}

/** Collects a stream's text keeping only its head and tail, so a chatty command cannot fill memory. */
class BoundedText {
  private head = "";
  private tail = "";
  total = 0;
  constructor(private readonly limit: number) {}

  append(chunk: string): void {
    this.total += chunk.length;
    let rest = chunk;
    if (this.head.length < this.limit) {
      const room = this.limit - this.head.length;
      this.head += rest.slice(0, room);
      rest = rest.slice(room);
    }
    if (rest !== "") this.tail = (this.tail + rest).slice(-this.limit);
  }

  /** At most `budget` characters of content (budget <= limit), plus the marker when cut. */
  render(budget: number): string {
    const complete = this.head.length + this.tail.length === this.total;
    if (complete && this.total <= budget) return this.head + this.tail;
    const half = Math.floor(budget / 2);
    const whole = complete ? this.head + this.tail : undefined;
    const head = (whole ?? this.head).slice(0, half);
    const tail = budget - half > 0 ? (whole ?? this.tail).slice(-(budget - half)) : "";
    return `${head}\n[... ${this.total - head.length - tail.length} characters cut ...]\n${tail}`;
  }
}

interface RunOptions {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  signal: AbortSignal;
  maxOutputChars: number;
  /** For bwrap: contents written into descriptors 3, 4, ... */
  files: SandboxFile[];
}

interface RunResult {
  stdout: BoundedText;
  stderr: BoundedText;
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  timedOut: boolean;
  aborted: boolean;
}

/** The variable that marks every process of one call, so one that left the group is found. */
const RUN_MARKER = "COUNTBOT_EXEC_RUN";

/**
 * Runs the process as the leader of its own process group (`detached`), so one kill of `-pid`
 * reaches everything it started. The group is killed on timeout, on abort, and when the shell
 * exits (nothing it left in the background outlives the call). A process that started a session
 * of its own (`setsid`) is outside the group: it still carries the run's marker in its
 * environment, so it is found in /proc and killed as well. (Under bubblewrap the PID namespace
 * already ends with the command; a process that cleared its environment can only hide from this
 * outside the sandbox, which is why running without one takes an explicit opt-in.)
 */
function runProcess(options: RunOptions): Promise<RunResult> {
  if (options.signal.aborted) return Promise.resolve({ stdout: new BoundedText(0), stderr: new BoundedText(0), exitCode: null, exitSignal: null, timedOut: false, aborted: true });
  return new Promise((resolve, reject) => {
    const marker = randomUUID();
    const child = spawn(options.file, options.args, {
      cwd: options.cwd,
      env: { ...options.env, [RUN_MARKER]: marker },
      detached: true,
      stdio: ["ignore", "pipe", "pipe", ...options.files.map(() => "pipe" as const)],
    });
    writeSandboxFiles(child, options.files);
    const stdout = new BoundedText(options.maxOutputChars);
    const stderr = new BoundedText(options.maxOutputChars);
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => stdout.append(chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => stderr.append(chunk));
    let timedOut = false;
    let aborted = false;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let drainTimer: NodeJS.Timeout | undefined;

    const killGroup = (): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // The group is already gone.
      }
      void killMarked(`${RUN_MARKER}=${marker}`);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, options.timeoutMs);
    const onAbort = (): void => {
      aborted = true;
      killGroup();
    };
    options.signal.addEventListener("abort", onAbort, { once: true });

    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(drainTimer);
      options.signal.removeEventListener("abort", onAbort);
      resolve({ stdout, stderr, exitCode: exit?.code ?? null, exitSignal: exit?.signal ?? null, timedOut, aborted });
    };
    child.on("error", (error) => {
      clearTimeout(timer);
      options.signal.removeEventListener("abort", onAbort);
      reject(error);
    });
    child.on("exit", (code, signal) => {
      exit = { code, signal };
      killGroup();
      // A process that left the group (setsid) may still hold the pipes: stop waiting for it.
      drainTimer = setTimeout(() => {
        child.stdout!.destroy();
        child.stderr!.destroy();
        finish();
      }, DRAIN_GRACE_MS);
    });
    child.on("close", finish);
  });
}

/**
 * SIGKILLs every process whose environment carries `entry` (a run's marker), twice over, so a
 * child forked while the first sweep ran is caught by the second. Best effort: /proc may be absent.
 */
async function killMarked(entry: string): Promise<void> {
  for (let sweep = 0; sweep < 2; sweep += 1) {
    const names = await readdir("/proc").catch(() => [] as string[]);
    for (const name of names) {
      if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
      const environment = await readFile(`/proc/${name}/environ`, "latin1").catch(() => "");
      if (!environment.split("\0").includes(entry)) continue;
      try {
        process.kill(Number(name), "SIGKILL");
      } catch {
        // Gone already.
      }
    }
  }
}
