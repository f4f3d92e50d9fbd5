/**
 * A redis-server of the test's own on a free loopback port, for tests that need one set up a
 * particular way (an eviction policy, no AOF) or that stop it. Stopped by pid; `kill` and
 * `restart` take it down with SIGKILL and bring it back on the same port and directory (with
 * `--appendonly yes`, from its AOF).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";

export interface OwnRedis {
  url: string;
  port: number;
  /** SIGKILL, keeping its directory (and AOF) for `restart`. */
  kill(): Promise<void>;
  /** Starts it again on the same port and directory; resolves once it answers PING. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function startRedisServer(args: string[] = []): Promise<OwnRedis> {
  const directory = await mkdtemp(path.join(tmpdir(), "countbot-redis-"));
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess;
  const start = async () => {
    child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--dir", directory, ...args], { stdio: "ignore" });
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on("error", () => undefined);
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        await probe.connect();
        await probe.ping();
        break;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not start: ${String(error)}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    probe.disconnect();
  };
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null && child.pid) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      process.kill(child.pid, "SIGKILL");
      await exited;
    }
  };
  await start();
  return {
    url,
    port,
    kill,
    restart: start,
    async stop() {
      await kill();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
