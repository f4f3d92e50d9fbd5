/**
 * Starts ./fake-llm-process.ts and drives it over IPC: the fake OpenAI server the benchmarks'
 * CountBot processes call, in its own process (its CPU is reported apart).
 */
import { startIpcChild } from "./ipc-child.js";

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
  const child = await startIpcChild(new URL("./fake-llm-process.ts", import.meta.url), "the fake LLM process");
  return {
    url: String(child.ready.url),
    pid: child.pid,
    setDelay: async (ms) => void (await child.call("delay", { ms })),
    calls: async () => {
      const { starts, connections } = await child.call("calls");
      return { starts: starts as number[], connections: Number(connections) };
    },
    reset: async () => void (await child.call("reset")),
    close: () => child.close(),
  };
}
