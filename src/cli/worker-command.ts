/** `countbot worker`: agent turns from the Redis bus, as many processes as you like. */
import { createWorker } from "../app/worker.js";
import { createInfrastructure } from "../app/infrastructure.js";
import { workspaceWarning } from "../app/workspace-markers.js";
import { createPrometheusMetrics, registerMetricsRoute } from "../app/metrics.js";
import { startTracing } from "../app/tracing.js";
import { type ApiServer, createApiServer } from "../api/server.js";
import { reloaderFor, untilSignalled } from "./lifecycle.js";
import { type CliContext, loadCliConfig } from "./setup.js";

export async function runWorkerCommand(context: CliContext = {}): Promise<number> {
  const { config, logger, withdrawn, source } = loadCliConfig({ ...context, service: true, runsTools: true });
  const tracing = await startTracing("worker", logger, withdrawn.environment);
  const infrastructure = await createInfrastructure(config, logger, { requireRedis: "worker" });
  const metrics = createPrometheusMetrics({ role: "worker" });
  metrics.watch({ bus: infrastructure.bus });
  const worker = await createWorker(config, logger, infrastructure, { metrics });
  // Workers serve no API; with metrics.workerPort they serve /metrics (and the probes) for scraping.
  let server: ApiServer | undefined;
  if (config.metrics.workerPort !== undefined) {
    server = createApiServer({
      bus: infrastructure.bus,
      config: { ...config.api, port: config.metrics.workerPort },
      logger,
      readiness: async () => {
        const checks = await infrastructure.checks();
        return { ready: Object.values(checks).every((check) => check.ok), checks };
      },
      routes: [(scope) => registerMetricsRoute(scope, metrics)],
    });
    try {
      const address = await server.listen();
      logger.info(address, "worker metrics listening");
    } catch (error) {
      await worker.close().catch(() => undefined);
      await infrastructure.close().catch(() => undefined);
      await tracing.shutdown();
      throw error;
    }
  }
  metrics.watch({ queues: () => worker.jobs.queueCounts() });
  // Workers on several machines must share one workspace: say so at start when they do not.
  const marker = await infrastructure.markWorkspace?.(worker.workspace);
  const shared = marker && (await marker.check());
  const warning = shared && workspaceWarning(shared, worker.workspace);
  if (warning) logger.warn(warning);
  const running = worker.run();
  const unannounce = infrastructure.announce("worker");
  const reloader = await reloaderFor(logger, infrastructure, config, source, (next) => worker.reload(next), withdrawn.environment);
  const signalled = untilSignalled(logger, async () => {
    await unannounce();
    await marker?.remove();
    await reloader.close();
    await worker.consumer.stop(config.shutdownGraceMs);
    await running;
    await worker.close();
    await server?.close();
    await infrastructure.close();
    await tracing.shutdown();
  });
  logger.info({ model: worker.model.id, concurrency: config.agent.maxConcurrentTurns, config: source.file ?? "none" }, "worker started");
  return signalled;
}
