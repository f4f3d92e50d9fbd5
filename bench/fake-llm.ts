/**
 * Starts ./fake-llm-process.ts and drives it over IPC: the fake OpenAI server the benchmarks'
 * CountBot processes call, in its own process (its CPU is reported apart).
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";

export interface FakeLlmProcess {
  /** Base URL ending in `/v1`. */
  url: string;
  pid: number;
  setDelay(ms: number): Promise<void>;
  /** Start times (ms since the epoch) of the calls since the last reset, and TCP connections accepted in all. */
  calls(): Promise<{ starts: number[]; connections: number }>;
  reset(): Promise<void>;
  close(): Promise<void>;
}

export async function startFakeLlmProcess(): Promise<FakeLlmProcess> {
  const child: ChildProcess = fork(fileURLToPath(new URL("./fake-llm-process.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  if (child.pid === undefined) throw new Error("could not start the fake LLM process");
  const pid = child.pid;
  // Last resort (an uncaught error, process.exit): never leave it running.
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  const waiting = new Map<number, (body: Record<string, unknown>) => void>();
  let nextId = 1;
  child.on("message", (raw) => {
    const body = raw as { id: number } & Record<string, unknown>;
    waiting.get(body.id)?.(body);
    waiting.delete(body.id);
  });
  const exited = new Promise<void>((resolve) =>
    child.once("exit", () => {
      process.off("exit", killOnExit);
      resolve();
    }),
  );
  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    waiting.set(0, resolve);
    void exited.then(() => reject(new Error("the fake LLM process exited before it was ready")));
  });
  const { url } = await ready;
  const call = (type: string, extra: Record<string, unknown> = {}) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, resolve);
      child.send({ id, type, ...extra }, (error) => error && reject(error));
    });
  return {
    url: String(url),
    pid,
    setDelay: async (ms) => void (await call("delay", { ms })),
    calls: async () => {
      const { starts, connections } = await call("calls");
      return { starts: starts as number[], connections: Number(connections) };
    },
    reset: async () => void (await call("reset")),
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const killTimer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await call("close").catch(() => undefined);
      await exited;
      clearTimeout(killTimer);
    },
  };
}
