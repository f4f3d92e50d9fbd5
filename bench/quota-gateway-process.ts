/**
 * One gateway of the quota bench in a process of its own, started by ./quotas.ts: two gateways of
 * one bot are two processes, each with its own event loop, as a leader hand-over has them.
 *
 * Over the IPC channel (./ipc-child.ts): `start` (fakes' endpoints, redisUrl, prefix, dataDir)
 * starts the gateway (../tests/support/quota-harness.ts) leading every account; `counters` answers
 * its governor's counters; `close` stops it.
 */
import { type FakeEndpoints, type Gateway, startGateway } from "../tests/support/quota-harness.js";
import { serveIpc } from "./ipc-child.js";

let gateway: Gateway | undefined;

serveIpc(
  {},
  async (request) => {
    if (request.type === "start") {
      gateway = await startGateway({ fakes: request.fakes as FakeEndpoints, redisUrl: String(request.redisUrl), prefix: String(request.prefix), dataDir: String(request.dataDir) });
      return {};
    }
    if (request.type === "counters") return { counters: gateway?.counters };
    throw new Error(`unknown request ${request.type}`);
  },
  async () => {
    await gateway?.close();
  },
);
