/**
 * A minimal Chrome DevTools Protocol client over a process's `--inspect` WebSocket: the benchmarks
 * force a GC in a CountBot process and read its JS heap with it.
 */
import WebSocket from "ws";

export interface Inspector {
  call(method: string, params?: object): Promise<Record<string, unknown>>;
  /** JS heap in use after a full GC, bytes. */
  heapAfterGc(): Promise<number>;
  close(): void;
}

export async function connectInspector(url: string): Promise<Inspector> {
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  let nextId = 0;
  const waiting = new Map<number, { resolve: (result: Record<string, unknown>) => void; reject: (error: Error) => void }>();
  socket.on("message", (data) => {
    const reply = JSON.parse(String(data)) as { id?: number; result?: Record<string, unknown>; error?: { message: string } };
    if (reply.id === undefined) return;
    const waiter = waiting.get(reply.id);
    waiting.delete(reply.id);
    if (reply.error) waiter?.reject(new Error(reply.error.message));
    else waiter?.resolve(reply.result ?? {});
  });
  const call = (method: string, params: object = {}) => {
    const id = ++nextId;
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
  };
  return {
    call,
    async heapAfterGc() {
      await call("HeapProfiler.collectGarbage");
      return Number((await call("Runtime.getHeapUsage")).usedSize);
    },
    close: () => socket.terminate(),
  };
}

/** The inspector URL a process printed on start (`Debugger listening on ws://...`). */
export function inspectorUrlIn(output: string): string | undefined {
  return /Debugger listening on (ws:\/\/\S+)/.exec(output)?.[1];
}
