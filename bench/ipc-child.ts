/**
 * A benchmark helper process (a fake server the benchmarked processes call) forked with tsx and
 * driven over its IPC channel: the child sends `{ id: 0, ... }` once it is ready, then answers each
 * `{ id, type, ... }` with `{ id, ... }`; `close` asks it to stop, and it is killed if it does not.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";

export interface IpcChild {
  pid: number;
  /** What the child sent when it was ready. */
  ready: Record<string, unknown>;
  call(type: string, extra?: Record<string, unknown>): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

/** Forks `file` (a URL next to the caller) and waits for it to say it is ready. */
export async function startIpcChild(file: URL, what: string): Promise<IpcChild> {
  const child: ChildProcess = fork(fileURLToPath(file), [], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  if (child.pid === undefined) throw new Error(`could not start ${what}`);
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
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    waiting.set(0, resolve);
    void exited.then(() => reject(new Error(`${what} exited before it was ready`)));
  });
  const call = (type: string, extra: Record<string, unknown> = {}) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, resolve);
      child.send({ id, type, ...extra }, (error) => error && reject(error));
      void exited.then(() => reject(new Error(`${what} exited`)));
    });
  return {
    pid,
    ready,
    call,
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const killTimer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await call("close").catch(() => undefined);
      await exited;
      clearTimeout(killTimer);
    },
  };
}

/** The child's side: answers requests with `handle`, stops on `close` (after `stop`) or when the parent goes. */
export function serveIpc(ready: Record<string, unknown>, handle: (request: { type: string } & Record<string, unknown>) => Promise<Record<string, unknown> | void>, stop: () => Promise<void>): void {
  process.on("message", (raw) => {
    const request = raw as { id: number; type: string } & Record<string, unknown>;
    const answer = (body: Record<string, unknown> | void) => process.send!({ id: request.id, ...(body ?? {}) });
    if (request.type === "close") {
      void stop().finally(() => {
        answer();
        process.exit(0);
      });
      return;
    }
    void handle(request).then(answer, (error: unknown) => answer({ error: String(error) }));
  });
  process.on("disconnect", () => process.exit(0));
  process.send!({ id: 0, ...ready });
}
