/**
 * bull-board, the BullMQ dashboard, at `/admin/queues` behind the API token (Redis deployments
 * only: the in-process queue has nothing to show). It reads the deployment's `subagents` and
 * `workflows` queues through queues of its own on the same connection.
 */
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { FastifyAdapter } from "@bull-board/fastify";
import { Queue } from "bullmq";
import type { FastifyInstance } from "fastify";
import type { BullmqConnection } from "../redis/client.js";

export const QUEUE_BOARD_PATH = "/admin/queues";

export interface QueueBoard {
  register(scope: FastifyInstance): void;
  close(): Promise<void>;
}

export function createQueueBoard(options: { connection: BullmqConnection; prefix: string; queues: readonly string[] }): QueueBoard {
  const queues = options.queues.map((name) => new Queue(name, { connection: options.connection, prefix: `{${options.prefix}}` }));
  const adapter = new FastifyAdapter();
  adapter.setBasePath(QUEUE_BOARD_PATH);
  createBullBoard({ queues: queues.map((queue) => new BullMQAdapter(queue, { readOnlyMode: false })), serverAdapter: adapter });
  return {
    register(scope) {
      void scope.register(adapter.registerPlugin(), { prefix: QUEUE_BOARD_PATH });
    },
    close: async () => void (await Promise.all(queues.map((queue) => queue.close()))),
  };
}
