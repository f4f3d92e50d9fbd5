/** `countbot worker`: agent turns from the Redis bus, as many processes as you like. */
import { createWorker } from "../app/agent.js";
import { createInfrastructure } from "../app/infrastructure.js";
import { untilSignalled } from "./lifecycle.js";
import { loadCliConfig } from "./setup.js";

export async function runWorkerCommand(): Promise<number> {
  const { config, logger } = loadCliConfig({ service: true });
  const infrastructure = await createInfrastructure(config, logger, { requireRedis: "worker" });
  const worker = await createWorker(config, logger, infrastructure);
  const running = worker.run();
  logger.info({ model: worker.model.id, concurrency: config.agent.maxConcurrentTurns }, "worker started");
  return untilSignalled(logger, async () => {
    await worker.consumer.stop(config.shutdownGraceMs);
    await running;
    await worker.close();
    await infrastructure.close();
  });
}
