/** `countbot gateway`: channels and the HTTP API over the Redis bus. */
import { createJobsOn } from "../app/jobs.js";
import { createGateway } from "../app/gateway.js";
import { createInfrastructure } from "../app/infrastructure.js";
import { createPrometheusMetrics } from "../app/metrics.js";
import { startTracing } from "../app/tracing.js";
import { channelHealthJson } from "../gateway/channel-health.js";
import { reloaderFor, untilSignalled } from "./lifecycle.js";
import { type CliContext, announceLogin, loadCliConfig } from "./setup.js";

export async function runGatewayCommand(context: CliContext = {}): Promise<number> {
  const { config, logger, apiToken, withdrawn, source } = loadCliConfig({ ...context, service: true, serveApi: true });
  const tracing = await startTracing("gateway", logger, withdrawn.environment);
  const infrastructure = await createInfrastructure(config, logger, { requireRedis: "gateway" });
  // Jobs are created here only to cancel tasks and team runs through the API; workers run them.
  const jobs = createJobsOn(infrastructure, config, logger, { workspace: config.workspace });
  const metrics = createPrometheusMetrics({ role: "gateway" });
  metrics.watch({ queues: () => jobs.queueCounts() });
  const gateway = await createGateway({
    config,
    logger,
    infrastructure,
    subagents: jobs.subagents,
    workflows: jobs.workflows,
    teams: jobs.teams,
    queueCounts: () => jobs.queueCounts(),
    metrics,
    apiToken,
    onReloadRequest: () => reloader.reload("api"),
  });
  const reloader = await reloaderFor(logger, infrastructure, config, source, (next) => gateway.reload(next), withdrawn.environment);
  let unannounce = async () => undefined as void;
  const close = async () => {
    await unannounce();
    await reloader.close();
    await gateway.close();
    await jobs.close();
    await infrastructure.close();
    await tracing.shutdown();
  };
  let address: { url: string; port: number };
  try {
    address = await gateway.start();
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
  unannounce = infrastructure.announce("gateway", () => ({ channels: gateway.channels.map((channel) => channelHealthJson(channel.health())) }));
  const signalled = untilSignalled(logger, close);
  logger.info({ ...address, config: source.file ?? "none" }, "gateway listening");
  if (apiToken?.generated) announceLogin(address.url, apiToken.token, apiToken.file);
  return signalled;
}
