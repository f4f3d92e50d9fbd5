/**
 * `countbot start`: everything in one process. In-memory bus and file store, or Redis when
 * REDIS_URL is set (then more workers may join with `countbot worker`).
 */
import { createWorker } from "../app/agent.js";
import { createGateway } from "../app/gateway.js";
import { createInfrastructure } from "../app/infrastructure.js";
import { untilSignalled } from "./lifecycle.js";
import { loadCliConfig } from "./setup.js";

export async function runStartCommand(_args: string[]): Promise<number> {
  const { config, logger } = loadCliConfig({ service: true });
  const infrastructure = await createInfrastructure(config, logger);
  const worker = await createWorker(config, logger, infrastructure);
  const gateway = createGateway({
    config,
    logger,
    infrastructure,
    subagents: worker.jobs.subagents,
    workflows: worker.jobs.workflows,
    teams: worker.jobs.teams,
    checks: async () => ({ worker: { ok: true, detail: `${worker.consumer.active} turns running` } }),
  });
  const running = worker.run();
  const { url, port } = await gateway.start();
  logger.info({ url, port, model: worker.model.id, bus: infrastructure.kind }, "countbot started");
  return untilSignalled(logger, async () => {
    await gateway.close();
    await worker.consumer.stop(config.shutdownGraceMs);
    await running;
    await worker.close();
    await infrastructure.close();
  });
}
