/** What every CLI command starts with: the config and a logger that keeps secrets out. */
import type { Logger } from "pino";
import { loadCountbotConfig } from "../app/config.js";
import { collectSecrets } from "../config/mask.js";
import type { ResolvedConfig } from "../config/schema.js";
import { createLogger } from "../logger.js";

export function loadCliConfig(options: { service?: boolean } = {}): { config: ResolvedConfig; logger: Logger } {
  const config = loadCountbotConfig();
  // Interactive commands keep the terminal for the conversation: only warnings unless asked.
  const level = options.service || process.env.LOG_LEVEL ? config.log.level : "warn";
  const logger = createLogger({ level, secrets: collectSecrets(config) });
  return { config, logger };
}
