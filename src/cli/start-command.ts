/**
 * `countbot start`: everything in one process. In-memory bus and file store, or Redis when
 * REDIS_URL is set (then more workers may join with `countbot worker`).
 */
import { createInfrastructure, createWorker } from "../app.js";
import { createGateway } from "../gateway/gateway.js";
import { untilSignalled } from "./lifecycle.js";
import { loadCliConfig } from "./setup.js";

export async function runStartCommand(_args: string[]): Promise<number> {
  const { config, logger } = loadCliConfig({ service: true });
  const infrastructure = await createInfrastructure(config, logger);
  const worker = await createWorker(config, logger, infrastructure);
  const gateway = createGateway({
    config,
    logger,
    bus: infrastructure.bus,
    store: infrastructure.store,
    redis: infrastructure.redis,
    subagents: worker.jobs.subagents,
    checks: async () => ({ worker: { ok: true, detail: `${worker.loop.active} turns running` } }),
  });
  const running = worker.run();
  const { url, port } = await gateway.start();
  logger.info({ url, port, model: worker.model.id, bus: infrastructure.redis ? "redis" : "memory" }, "countbot started");
  return untilSignalled(logger, async () => {
    await gateway.close();
    await worker.loop.stop(config.shutdownGraceMs);
    await running;
    await worker.close();
    await infrastructure.close();
  });
}
