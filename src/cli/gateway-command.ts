/** `countbot gateway`: channels and the HTTP API over the Redis bus. */
import { createInfrastructure } from "../app.js";
import { createGateway } from "../gateway/gateway.js";
import { createJobs } from "../jobs/jobs.js";
import { untilSignalled } from "./lifecycle.js";
import { loadCliConfig } from "./setup.js";

export async function runGatewayCommand(_args: string[]): Promise<number> {
  const { config, logger } = loadCliConfig({ service: true });
  const infrastructure = await createInfrastructure(config, logger, { requireRedis: "gateway" });
  // Jobs are created here only to cancel tasks through the API; workers run them.
  const jobs = createJobs({ config, logger, bus: infrastructure.bus, store: infrastructure.store, redis: infrastructure.redis, workspace: config.workspace });
  const gateway = createGateway({ config, logger, bus: infrastructure.bus, store: infrastructure.store, redis: infrastructure.redis, subagents: jobs.subagents });
  const { url, port } = await gateway.start();
  logger.info({ url, port }, "gateway listening");
  return untilSignalled(logger, async () => {
    await gateway.close();
    await jobs.close();
    await infrastructure.close();
  });
}
