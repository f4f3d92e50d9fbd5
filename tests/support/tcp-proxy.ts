/**
 * A loopback TCP proxy for the network drops a browser sees: `cut()` ends every connection through
 * it (the page's WebSocket included), `refuse()` turns new ones away until `accept()`. The page is
 * loaded through the proxy's URL, so what it thinks is the server is the proxy.
 */
import { type Server, type Socket, connect, createServer } from "node:net";

export interface TcpProxy {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** Ends every open connection at once. */
  cut(): void;
  /** New connections are closed as soon as they arrive. */
  refuse(): void;
  /** New connections pass again. */
  accept(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { port: number; host?: string }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let refusing = false;
  const server: Server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = connect(target.port, target.host ?? "127.0.0.1");
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
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
  return {
    url: `http://127.0.0.1:${port}`,
    cut() {
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    },
    refuse() {
      refusing = true;
    },
    accept() {
      refusing = false;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
