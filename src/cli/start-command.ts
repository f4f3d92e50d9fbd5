/**
 * `countbot start`: everything in one process. In-memory bus and file store, or Redis when
 * REDIS_URL is set (then more workers may join with `countbot worker`). The gateway listens and its
 * channels connect before the worker takes a turn: a port that is taken ends the process with one
 * line; a platform that cannot be connected (unreachable, a refused token) is down and retried in
 * the background while the others serve (`/ready` and `countbot status` say so).
 */
import { type Worker, createWorker } from "../app/worker.js";
import { type Gateway, createGateway } from "../app/gateway.js";
import { createInfrastructure } from "../app/infrastructure.js";
import { createPrometheusMetrics } from "../app/metrics.js";
import { startTracing } from "../app/tracing.js";
import { channelHealthJson } from "../gateway/channel-health.js";
import { reloaderFor, untilSignalled } from "./lifecycle.js";
import { type CliContext, announceLogin, loadCliConfig } from "./setup.js";

export async function runStartCommand(context: CliContext = {}): Promise<number> {
  const { config, logger, apiToken, withdrawn, source } = loadCliConfig({ ...context, service: true, serveApi: true, runsTools: true });
  const tracing = await startTracing("start", logger, withdrawn.environment);
  const infrastructure = await createInfrastructure(config, logger);
  const metrics = createPrometheusMetrics({ role: "start" });
  let worker: Worker | undefined;
  let gateway: Gateway | undefined;
  let address: { url: string; port: number };
  const reloader = await reloaderFor(
    logger,
    infrastructure,
    config,
    source,
    (next) => {
      gateway?.reload(next);
      worker?.reload(next);
    },
    withdrawn.environment,
  );
  try {
    const created = await createWorker(config, logger, infrastructure, { metrics });
    worker = created;
    gateway = await createGateway({
      config,
      logger,
      infrastructure,
      subagents: created.jobs.subagents,
      workflows: created.jobs.workflows,
      teams: created.jobs.teams,
      queueCounts: () => created.jobs.queueCounts(),
      metrics,
      apiToken,
      onReloadRequest: () => reloader.reload("api"),
      checks: async () => ({ worker: { ok: true, detail: `${created.consumer.active} turns running` } }),
    });
    address = await gateway.start();
  } catch (error) {
    await gateway?.close().catch(() => undefined);
    await worker?.close().catch(() => undefined);
    await infrastructure.close().catch(() => undefined);
    await tracing.shutdown();
    throw error;
  }
  metrics.watch({ queues: () => worker.jobs.queueCounts() });
  const running = worker.run();
  const unannounce = infrastructure.announce("start", () => ({ channels: gateway.channels.map((channel) => channelHealthJson(channel.health())) }));
  const signalled = untilSignalled(logger, async () => {
    await unannounce();
    await reloader.close();
    await gateway.close();
    await worker.consumer.stop(config.shutdownGraceMs);
    await running;
    await worker.close();
    await infrastructure.close();
    await tracing.shutdown();
  });
  logger.info({ ...address, model: worker.model.id, bus: infrastructure.kind, config: source.file ?? "none" }, "countbot started");
  if (apiToken?.generated) announceLogin(address.url, apiToken.token, apiToken.file);
  return signalled;
}
