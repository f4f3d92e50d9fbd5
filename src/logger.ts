/**
 * Structured logs (pino) on stderr. Secret-bearing fields are redacted by path, and the known
 * secret values of the config are scrubbed from every line, so no token reaches a log.
 */
import { Writable } from "node:stream";
import pino, { type Logger } from "pino";
import { createRedactor } from "./config/mask.js";

export interface LoggerOptions {
  level: string;
  /** Secret values to scrub from every line (from collectSecrets(config)). */
  secrets?: string[];
  /** Where lines go. Default: stderr. */
  destination?: NodeJS.WritableStream;
}

const redactedPaths = [
  "apiKey",
  "token",
  "appSecret",
  "password",
  "*.apiKey",
  "*.token",
  "*.appSecret",
  "*.password",
  "headers.authorization",
  "*.headers.authorization",
];

export function createLogger(options: LoggerOptions): Logger {
  const target = options.destination ?? process.stderr;
  const secrets = (options.secrets ?? []).filter((secret) => secret.length > 0);
  const redact = createRedactor(secrets);
  const stream =
    secrets.length === 0
      ? target
      : new Writable({
          write(chunk: Buffer, _encoding, callback) {
            target.write(redact(chunk.toString("utf8")));
            callback();
          },
        });
  return pino({ level: options.level, redact: { paths: redactedPaths, censor: "[redacted]" } }, stream);
}
