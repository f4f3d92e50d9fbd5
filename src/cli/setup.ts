/** What every CLI command starts with: the config and a logger that keeps secrets out. */
import path from "node:path";
import pino, { type Logger } from "pino";
import { type ApiToken, readApiTokenFile, resolveApiToken } from "../app/api-token.js";
import { loadCountbotConfigWithSource } from "../app/config.js";
import { type WithdrawnSecrets, exposureUnderNoSandbox, withdrawSecrets } from "../app/secret-environment.js";
import { collectSecrets } from "../config/mask.js";
import type { ResolvedConfig } from "../config/schema.js";
import type { ConfigSource } from "../config/source.js";
import { createLogger, routeConsoleWarnings } from "../logger.js";

/** What every command takes from the program's own options. */
export interface CliContext {
  /** `--config FILE`: the config file, before COUNTBOT_CONFIG and the places looked at (src/config/source.ts). */
  configFile?: string;
}

export interface CliSetupOptions extends CliContext {
  /** A long-running service (start, gateway, worker): logs go to stderr. */
  service?: boolean;
  /** An interactive command (chat, agent) asked with --verbose to log on stderr too. */
  verbose?: boolean;
  /** Serves the HTTP API (start, gateway): resolve its token, generating one when none is configured. */
  serveApi?: boolean;
  /** Runs the agent's tools (start, worker, agent, chat): without a sandbox, log what a command can read. */
  runsTools?: boolean;
}

/**
 * Services log on stderr, as JSON for machines or pretty for people (`log.format`, LOG_FORMAT;
 * `auto`: pretty on a terminal). Interactive commands keep the terminal for the conversation:
 * their log goes to `<dataDir>/logs/countbot.log` unless `--verbose`.
 */
export function loadCliConfig(options: CliSetupOptions = {}): { config: ResolvedConfig; logger: Logger; apiToken?: ApiToken; withdrawn: WithdrawnSecrets; source: ConfigSource } {
  const { config, source } = loadCountbotConfigWithSource(options.configFile);
  // A generated API token is as secret as a configured one.
  const apiToken = options.serveApi ? resolveApiToken(config) : undefined;
  const generated = apiToken?.generated ? apiToken.token : readApiTokenFile(config);
  const secrets = [...collectSecrets(config), ...(generated ? [generated] : [])];
  const onTerminal = options.service || options.verbose;
  const destination = onTerminal ? process.stderr : logFile(config.dataDir);
  const pretty = config.log.format === "pretty" || (config.log.format === "auto" && onTerminal === true && process.stderr.isTTY === true);
  const logger = createLogger({ level: config.log.level, secrets, destination, pretty, batch: options.service === true });
  routeConsoleWarnings(logger);
  // Before anything is started that could run a command: see src/app/secret-environment.ts.
  const withdrawn = withdrawSecrets({ secrets });
  if (!withdrawn.environBlock.scrubbed) logger.warn({ variables: withdrawn.names, reason: withdrawn.environBlock.reason }, "the secret variables could not be blanked in this process's /proc environ");
  if (options.runsTools && config.tools.exec.enabled && config.tools.exec.sandbox === "none") {
    logger.warn({ canRead: exposureUnderNoSandbox(config, withdrawn, { pid: process.pid }) }, 'tools.exec.sandbox is "none": exec runs commands as this user, WITHOUT a sandbox; what a command can still read of the secrets is listed in canRead');
  }
  return { config, logger, apiToken, withdrawn, source };
}

function logFile(dataDir: string): NodeJS.WritableStream {
  // Written synchronously (a line logged just before exit is not lost), created 0600.
  return pino.destination({ dest: path.join(dataDir, "logs", "countbot.log"), sync: true, mkdir: true, mode: 0o600 }) as unknown as NodeJS.WritableStream;
}

/** Tells the operator (on stdout, never in the log) how to sign in with the generated token. */
export function announceLogin(url: string, token: string, file: string): void {
  process.stdout.write(`API token (kept in ${file}): sign in at ${url}/login?token=${encodeURIComponent(token)} or send "Authorization: Bearer <token>"\n`);
}
