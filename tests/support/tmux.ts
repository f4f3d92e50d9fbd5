/**
 * A real terminal for a command: tmux on a socket of its own, one pane running `countbot ARGS`
 * with exactly the environment given (`env -i`), its screen read with capture-pane, keys sent with
 * send-keys. The pane's shell writes the command's exit status to a file once it ends (tmux's own
 * pane status can stay empty). Closing kills the tmux server and the pane's process by pid.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { countbotBin } from "./run-cli.js";

export interface TerminalSession {
  /** The visible screen and the 200 lines above it. */
  screen(): Promise<string>;
  /** Resolves with the screen once it shows `what`; fails with the screen after `timeoutMs`. */
  waitFor(what: string | RegExp, timeoutMs?: number): Promise<string>;
  /** Types text as it is, without Enter. */
  type(text: string): Promise<void>;
  /** tmux key names: `Enter`, `C-c`, ... */
  keys(...names: string[]): Promise<void>;
  /** Whether the command is still running. */
  running(): Promise<boolean>;
  /** The command's exit status, once it exited. */
  exitStatus(timeoutMs?: number): Promise<string>;
  close(): Promise<void>;
}

function tmux(socket: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("tmux", ["-L", socket, ...args], { encoding: "utf8" }, (error, stdout, stderr) => (error ? reject(new Error(`tmux ${args[0]}: ${stderr || error.message}`)) : resolve(stdout)));
  });
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, "'\\''")}'`;
}

async function poll<T>(read: () => Promise<T | undefined>, timeoutMs: number, failure: () => Promise<string>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(await failure());
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Starts `countbot ARGS` in a 120x40 pane. `directory` holds the exit-status file. */
export async function startTerminal(args: string[], env: Record<string, string>, directory: string): Promise<TerminalSession> {
  const socket = `countbot-test-${process.pid}-${Date.now()}`;
  const statusFile = path.join(directory, `exit-status-${socket}`);
  const variables = Object.entries(env).map(([name, value]) => `${name}=${value}`);
  const command = ["env", "-i", ...variables, process.execPath, countbotBin, ...args].map(shellQuote).join(" ");
  await tmux(socket, "new-session", "-d", "-s", "main", "-x", "120", "-y", "40", "sh", "-c", `${command}; echo $? > ${shellQuote(statusFile)}`);
  await tmux(socket, "set-option", "-t", "main", "remain-on-exit", "on");
  const panePid = Number((await tmux(socket, "display-message", "-p", "-t", "main", "#{pane_pid}")).trim());
  const screen = () => tmux(socket, "capture-pane", "-p", "-S", "-200", "-t", "main");
  const status = async () => (await readFile(statusFile, "utf8").catch(() => "")).trim();
  return {
    screen,
    waitFor: (what, timeoutMs = 30_000) =>
      poll(
        async () => {
          const shown = await screen();
          return (typeof what === "string" ? shown.includes(what) : what.test(shown)) ? shown : undefined;
        },
        timeoutMs,
        async () => `the terminal never showed ${String(what)}:\n${await screen()}`,
      ),
    type: async (text) => void (await tmux(socket, "send-keys", "-t", "main", "-l", text)),
    keys: async (...names) => void (await tmux(socket, "send-keys", "-t", "main", ...names)),
    running: async () => (await status()) === "",
    exitStatus: (timeoutMs = 30_000) => poll(async () => (await status()) || undefined, timeoutMs, async () => `the command did not exit:\n${await screen()}`),
    async close() {
      await tmux(socket, "kill-server").catch(() => undefined);
      try {
        process.kill(panePid, "SIGKILL");
      } catch {
        // gone already
      }
    },
  };
}
