/** `countbot gateway`: channels and the HTTP API over the Redis bus. */
import { createJobsOn } from "../app/agent.js";
import { createGateway } from "../app/gateway.js";
import { createInfrastructure } from "../app/infrastructure.js";
import { untilSignalled } from "./lifecycle.js";
import { loadCliConfig } from "./setup.js";

export async function runGatewayCommand(_args: string[]): Promise<number> {
  const { config, logger } = loadCliConfig({ service: true });
  const infrastructure = await createInfrastructure(config, logger, { requireRedis: "gateway" });
  // Jobs are created here only to cancel tasks and team runs through the API; workers run them.
  const jobs = createJobsOn(infrastructure, config, logger, { workspace: config.workspace });
  const gateway = createGateway({ config, logger, infrastructure, subagents: jobs.subagents, workflows: jobs.workflows, teams: jobs.teams });
  const { url, port } = await gateway.start();
  logger.info({ url, port }, "gateway listening");
  return untilSignalled(logger, async () => {
    await gateway.close();
    await jobs.close();
    await infrastructure.close();
  });
}
