/**
 * Process lifecycle for the long-running commands: on SIGTERM/SIGINT stop gracefully (stop
 * claiming, let running turns finish within the grace period, release leases, close connections);
 * a second signal exits at once.
 */
import type { Logger } from "pino";
import { loadCountbotConfig } from "../app/config.js";
import { createConfigReloader } from "../app/reload.js";
import type { ResolvedConfig } from "../config/schema.js";
import type { ConfigSource } from "../config/source.js";

/**
 * Resolves with the exit code once a signal's shutdown is done. Call it BEFORE logging that the
 * process is ready: a signal that comes before the handlers are in place kills the process at
 * once (the kernel's default), and whoever waits for the ready line may send one right after it.
 */
export function untilSignalled(logger: Logger, shutdown: () => Promise<void>): Promise<number> {
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        logger.warn({ signal }, "second signal: exiting now");
        process.exit(1);
      }
      stopping = true;
      logger.info({ signal }, "shutting down: finishing running turns");
      shutdown().then(
        () => {
          process.off("SIGTERM", onSignal);
          process.off("SIGINT", onSignal);
          resolve(0);
        },
        (error: unknown) => {
          logger.error({ err: error }, "shutdown failed");
          resolve(1);
        },
      );
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
}

/** SIGHUP reloads the config (see src/app/reload.ts); returns the undo. */
export function onReloadSignal(reload: () => Promise<unknown>): () => void {
  const handler = () => void reload();
  process.on("SIGHUP", handler);
  return () => void process.off("SIGHUP", handler);
}

/** The config reloader of a long-running command, applying to what it runs. */
export async function reloaderFor(
  logger: Logger,
  infrastructure: { bus: Parameters<typeof createConfigReloader>[0]["bus"] },
  initial: ResolvedConfig,
  source: ConfigSource,
  apply: (config: ResolvedConfig) => void,
  /** The environment as it was at start: the secrets are no longer in process.env (src/app/secret-environment.ts). */
  environment?: Record<string, string>,
) {
  // The file the process started with, again (`--config` included); none found then: looked for again.
  const load = () => loadCountbotConfig({ file: source.file, ...(environment ? { env: environment } : {}) });
  const reloader = await createConfigReloader({ logger, bus: infrastructure.bus, load, initial, apply });
  const undo = onReloadSignal(() => reloader.reload("signal"));
  return {
    reload: reloader.reload,
    async close() {
      undo();
      await reloader.close();
    },
  };
}
