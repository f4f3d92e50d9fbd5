/**
 * Starts countbot processes for end-to-end tests and stops them by pid. A service process is ready
 * once it logs the line the test waits for (pino JSON on stderr).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { cleanEnvironment, countbotBin } from "./run-cli.js";

export interface ServiceProcess {
  child: ChildProcess;
  pid: number;
  output: () => string;
  /** Resolves with the first log record whose `msg` matches. */
  waitForLog(message: RegExp, timeoutMs?: number): Promise<Record<string, unknown>>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const running = new Set<ServiceProcess>();

export function startService(args: string[], env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, [countbotBin, ...args], { env: cleanEnvironment(env), stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const records: Array<Record<string, unknown>> = [];
  const waiters: Array<{ pattern: RegExp; resolve: (record: Record<string, unknown>) => void }> = [];
  let partial = "";
  const onData = (chunk: Buffer) => {
    const text = chunk.toString("utf8");
    output += text;
    partial += text;
    const lines = partial.split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      records.push(record);
      for (const waiter of [...waiters]) {
        if (waiter.pattern.test(String(record.msg))) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(record);
        }
      }
    }
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const service: ServiceProcess = {
    child,
    pid: child.pid!,
    output: () => output,
    waitForLog(pattern, timeoutMs = 20_000) {
      const found = records.find((record) => pattern.test(String(record.msg)));
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no log line matching ${pattern} from countbot ${args.join(" ")}:\n${output}`)), timeoutMs);
        waiters.push({
          pattern,
          resolve: (record) => {
            clearTimeout(timer);
            resolve(record);
          },
        });
        void exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`countbot ${args.join(" ")} exited (${code}) before logging ${pattern}:\n${output}`));
        });
      });
    },
    async stop(signal = "SIGTERM") {
      running.delete(service);
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      process.kill(service.pid, signal);
      const timer = setTimeout(() => child.exitCode === null && process.kill(service.pid, "SIGKILL"), 15_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
  running.add(service);
  return service;
}

/** Stops every service still running (afterEach/afterAll safety net). */
export async function stopAllServices(): Promise<void> {
  await Promise.all([...running].map((service) => service.stop("SIGKILL")));
}
