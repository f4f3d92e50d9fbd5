/**
 * Process lifecycle for the long-running commands: on SIGTERM/SIGINT stop gracefully (stop
 * claiming, let running turns finish within the grace period, release leases, close connections);
 * a second signal exits at once.
 */
import type { Logger } from "pino";

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
