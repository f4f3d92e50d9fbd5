/** `countbot gateway`: channels and the HTTP API over the Redis bus. */
import { createInfrastructure } from "../app.js";
import { createGateway } from "../gateway/gateway.js";
import { untilSignalled } from "./lifecycle.js";
import { loadCliConfig } from "./setup.js";

export async function runGatewayCommand(_args: string[]): Promise<number> {
  const { config, logger } = loadCliConfig({ service: true });
  const infrastructure = await createInfrastructure(config, logger, { requireRedis: "gateway" });
  const gateway = createGateway({ config, logger, bus: infrastructure.bus, store: infrastructure.store, redis: infrastructure.redis });
  const { url, port } = await gateway.start();
  logger.info({ url, port }, "gateway listening");
  return untilSignalled(logger, async () => {
    await gateway.close();
    await infrastructure.close();
  });
}
