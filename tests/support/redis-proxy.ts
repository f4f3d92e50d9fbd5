/**
 * A loopback TCP proxy in front of a Redis, for the faults a dying connection brings: a reply lost
 * with the connection (the client library then replays the command on a new one), and commands
 * held back as if queued offline (they reach Redis late, carrying the client's old clock).
 */
import { createServer, type Server, type Socket, connect } from "node:net";

export interface RedisProxy {
  url: string;
  /**
   * The next time a request containing `pattern` passes, forward it, then drop its reply and cut
   * that client's connection. Resolves once that happened.
   */
  loseReplyTo(pattern: string): Promise<void>;
  /** The next reply containing `pattern` is dropped and its connection cut. Resolves once that happened. */
  loseReplyContaining(pattern: string): Promise<void>;
  /** Requests are held back for `ms` (in order) before they reach Redis, as an offline queue would. */
  holdRequests(ms: number): void;
  close(): Promise<void>;
}

interface Rule {
  kind: "after-request" | "reply-containing";
  pattern: string;
  done: () => void;
}

export async function startRedisProxy(target: { host?: string; port: number }): Promise<RedisProxy> {
  const rules: Rule[] = [];
  const sockets = new Set<Socket>();
  let holdUntil = 0;
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host ?? "127.0.0.1");
    sockets.add(client).add(upstream);
    let armed: Rule | undefined;
    const cut = (rule: Rule) => {
      rules.splice(rules.indexOf(rule), 1);
      client.destroy();
      upstream.destroy();
      rule.done();
    };
    client.on("data", (data: Buffer) => {
      const forward = () => {
        if (upstream.destroyed) return;
        upstream.write(data);
        const rule = rules.find((candidate) => candidate.kind === "after-request" && data.includes(candidate.pattern));
        if (rule) armed = rule;
      };
      const wait = holdUntil - Date.now();
      if (wait > 0) setTimeout(forward, wait);
      else forward();
    });
    upstream.on("data", (data: Buffer) => {
      if (armed) return cut(armed);
      const rule = rules.find((candidate) => candidate.kind === "reply-containing" && data.includes(candidate.pattern));
      if (rule) return cut(rule);
      client.write(data);
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  const rule = (kind: Rule["kind"], pattern: string) => new Promise<void>((done) => rules.push({ kind, pattern, done }));
  return {
    url: `redis://127.0.0.1:${port}`,
    loseReplyTo: (pattern) => rule("after-request", pattern),
    loseReplyContaining: (pattern) => rule("reply-containing", pattern),
    holdRequests(ms) {
      holdUntil = Date.now() + ms;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
