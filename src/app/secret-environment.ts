/**
 * Secrets leave the process environment once the config is loaded. With `tools.exec.sandbox:
 * "none"` a command runs as this user, and every same-user process can read
 * `/proc/<pid>/environ` of this one (`cat /proc/$PPID/environ`, `ps eww`, through a symlink, a
 * glob, ...). That file shows the environment block the process was started with, not
 * `process.env`: deleting a variable from `process.env` (unsetenv) leaves its bytes there. So,
 * after the config holds the values:
 *
 * 1. every secret variable is deleted from `process.env`, so no child inherits it (exec and MCP
 *    servers get a minimal environment anyway), and a later config load (SIGHUP) reads the copy
 *    kept here instead;
 * 2. its value's bytes in the original block are overwritten with NULs through `/proc/self/mem`
 *    (a process may write its own memory), located by `/proc/self/stat`'s env_start and env_end.
 *    `/proc/<pid>/environ` then shows `NAME=` and nothing after it.
 *
 * A secret variable is one whose value holds a secret the config loaded (a key, a token, a
 * password in a URL), or whose name says it is one (`*_KEY`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`,
 * ...). What cannot be taken away from a command running as the same user without a sandbox (this
 * process's memory where ptrace is not restricted, the files this user can read, other processes'
 * environments) is listed by {@link exposureUnderNoSandbox} for `doctor` and the start log.
 */
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";
import type { ResolvedConfig } from "../config/schema.js";
import { errorMessage } from "../errors.js";

/** Names that say a secret; OTLP exporter headers carry a tracing backend's key (`authorization=…`). */
const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|^OTEL_EXPORTER_OTLP_(?:TRACES_)?HEADERS$/i;
/** Secrets shorter than this are not looked for inside other variables' values. */
const MIN_SECRET_LENGTH = 8;

export interface WithdrawnSecrets {
  /** Names of the variables taken out of the environment. */
  names: string[];
  /** The environment as it was: what a later config load (a reload) reads. */
  environment: Record<string, string>;
  /** Whether `/proc/self/environ` no longer shows their values, and why not when it does. */
  environBlock: { scrubbed: true } | { scrubbed: false; reason: string };
}

export interface WithdrawOptions {
  /** The secrets the config holds (collectSecrets, the generated API token). */
  secrets: readonly string[];
  env?: NodeJS.ProcessEnv;
  /** Where /proc is; tests point elsewhere to see a failure reported. */
  proc?: string;
}

/** Takes the secret variables out of `env` (process.env) and out of this process's environment block. */
export function withdrawSecrets(options: WithdrawOptions): WithdrawnSecrets {
  const env = options.env ?? process.env;
  const environment = Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));
  const secrets = options.secrets.filter((secret) => secret.length >= MIN_SECRET_LENGTH);
  const names = Object.entries(environment)
    .filter(([name, value]) => value !== "" && (SECRET_NAME.test(name) || secrets.some((secret) => value.includes(secret))))
    .map(([name]) => name);
  for (const name of names) delete env[name];
  let environBlock: WithdrawnSecrets["environBlock"];
  try {
    scrubEnvironBlock(new Map(names.map((name) => [name, environment[name]!])), options.proc ?? "/proc");
    environBlock = { scrubbed: true };
  } catch (error) {
    environBlock = { scrubbed: false, reason: errorMessage(error) };
  }
  return { names, environment, environBlock };
}

/** Overwrites the values of `variables` (name → value) in this process's original environment block with NULs. */
function scrubEnvironBlock(variables: ReadonlyMap<string, string>, proc: string): void {
  if (variables.size === 0) return;
  const stat = readFileSync(`${proc}/self/stat`, "utf8");
  // Fields after the command name (which may hold spaces) start at field 3; env_start is 50, env_end 51.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const start = Number(fields[50 - 3]);
  const end = Number(fields[51 - 3]);
  if (!Number.isSafeInteger(start) || !(end > start)) throw new Error(`${proc}/self/stat gives no environment block (env_start ${fields[50 - 3]}, env_end ${fields[51 - 3]})`);
  const block = readFileSync(`${proc}/self/environ`);
  const memory = openSync(`${proc}/self/mem`, "r+");
  try {
    let offset = 0;
    while (offset < block.length) {
      const next = block.indexOf(0, offset);
      const entryEnd = next === -1 ? block.length : next;
      const equals = block.indexOf(0x3d, offset);
      if (equals !== -1 && equals < entryEnd && variables.has(block.subarray(offset, equals).toString("utf8"))) {
        const length = entryEnd - equals - 1;
        if (length > 0) writeSync(memory, Buffer.alloc(length), 0, length, start + equals + 1);
      }
      offset = entryEnd + 1;
    }
  } finally {
    closeSync(memory);
  }
  const after = readFileSync(`${proc}/self/environ`);
  for (const [name, value] of variables) {
    if (after.includes(Buffer.from(`${name}=${value}`))) throw new Error(`${name} still shows in ${proc}/self/environ after overwriting it`);
  }
}

/**
 * What a command run without a sandbox can still read of the secrets, one line each, for `doctor`
 * and the start log. Exact about this machine: whether the environment block was scrubbed, and
 * whether the kernel lets a same-user process read this one's memory (Yama's ptrace_scope).
 */
export function exposureUnderNoSandbox(config: Pick<ResolvedConfig, "dataDir">, withdrawn: Pick<WithdrawnSecrets, "names" | "environBlock">, options: { pid?: number; proc?: string } = {}): string[] {
  const pid = options.pid ?? "<pid>";
  const proc = options.proc ?? "/proc";
  const lines: string[] = [];
  const listed = withdrawn.names.length > 0 ? withdrawn.names.join(", ") : "none were set";
  lines.push(
    withdrawn.environBlock.scrubbed
      ? `environment: the secret variables (${listed}) are out of this process's environment and blanked in /proc/${pid}/environ; children never get them`
      : `environment: /proc/${pid}/environ still shows ${listed}: it could not be blanked (${withdrawn.environBlock.reason})`,
  );
  const scope = ptraceScope(proc);
  lines.push(
    scope !== undefined && scope >= 1
      ? `memory: kernel.yama.ptrace_scope is ${scope}: a command cannot read this process's memory`
      : `memory: a command CAN read every key from this process's memory (/proc/${pid}/mem, a debugger): kernel.yama.ptrace_scope is ${scope ?? "not present (no Yama)"}; 1 or more stops that`,
  );
  lines.push(`files: a command can read whatever this user can: the config file, ${config.dataDir} (the generated api-token, sessions, memory, the audit log), and any .env file`);
  lines.push("other processes: the shell, npm or service manager that started countbot keeps the variables it was given in its own environment, readable the same way");
  return lines;
}

function ptraceScope(proc: string): number | undefined {
  try {
    const value = Number(readFileSync(`${proc}/sys/kernel/yama/ptrace_scope`, "utf8").trim());
    return Number.isInteger(value) ? value : undefined;
  } catch {
    return undefined;
  }
}
