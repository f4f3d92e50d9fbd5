/** What every CLI command starts with: the config and a logger that keeps secrets out. */
import path from "node:path";
import pino, { type Logger } from "pino";
import { loadCountbotConfig } from "../app/config.js";
import { collectSecrets } from "../config/mask.js";
import type { ResolvedConfig } from "../config/schema.js";
import { createLogger, routeConsoleWarnings } from "../logger.js";

export interface CliSetupOptions {
  /** A long-running service (start, gateway, worker): logs go to stderr. */
  service?: boolean;
  /** An interactive command (chat, agent) asked with --verbose to log on stderr too. */
  verbose?: boolean;
}

/**
 * Services log on stderr, as JSON for machines or pretty for people (`log.format`, LOG_FORMAT;
 * `auto`: pretty on a terminal). Interactive commands keep the terminal for the conversation:
 * their log goes to `<dataDir>/logs/countbot.log` unless `--verbose`.
 */
export function loadCliConfig(options: CliSetupOptions = {}): { config: ResolvedConfig; logger: Logger } {
  const config = loadCountbotConfig();
  const secrets = collectSecrets(config);
  const onTerminal = options.service || options.verbose;
  const destination = onTerminal ? process.stderr : logFile(config.dataDir);
  const pretty = config.log.format === "pretty" || (config.log.format === "auto" && onTerminal === true && process.stderr.isTTY === true);
  const logger = createLogger({ level: config.log.level, secrets, destination, pretty });
  routeConsoleWarnings(logger);
  return { config, logger };
}

function logFile(dataDir: string): NodeJS.WritableStream {
  // Written synchronously (a line logged just before exit is not lost), created 0600.
  return pino.destination({ dest: path.join(dataDir, "logs", "countbot.log"), sync: true, mkdir: true, mode: 0o600 }) as unknown as NodeJS.WritableStream;
}
