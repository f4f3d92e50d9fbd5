/**
 * Structured logs (pino) on stderr. Secret-bearing fields are redacted by path, and the known
 * secret values of the config are scrubbed from every line, so no token reaches a log.
 */
import { Writable } from "node:stream";
import { format } from "node:util";
import pino, { type Logger } from "pino";
import pretty from "pino-pretty";
import { createRedactor } from "./config/mask.js";

export interface LoggerOptions {
  level: string;
  /** Secret values to scrub from every line (from collectSecrets(config)). */
  secrets?: string[];
  /** Where lines go. Default: stderr. */
  destination?: NodeJS.WritableStream;
  /** Lines for people (time, level, message, then the fields) instead of JSON. */
  pretty?: boolean;
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
  const destination = options.destination ?? process.stderr;
  // Secrets are scrubbed from the JSON line first; the pretty printer then formats what is left.
  const target: NodeJS.WritableStream = options.pretty
    ? pretty({ destination, sync: true, colorize: Boolean((destination as { isTTY?: boolean }).isTTY) && !process.env.NO_COLOR, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname" })
    : destination;
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

/**
 * Sends what libraries print with console.warn and console.error (BullMQ's eviction warning, say)
 * into the logger, each distinct message once, so a JSON log stays JSON. Returns the undo.
 */
export function routeConsoleWarnings(logger: Logger): () => void {
  const original = { warn: console.warn, error: console.error };
  const seen = new Set<string>();
  const route = (level: "warn" | "error") => (...args: unknown[]) => {
    const message = format(...args);
    if (seen.has(message)) return;
    if (seen.size < 1_000) seen.add(message);
    logger[level]({ source: "console" }, message);
  };
  console.warn = route("warn");
  console.error = route("error");
  return () => Object.assign(console, original);
}

const LEVELS = new Set(["fatal", "error", "warn", "info", "debug", "trace"]);

/**
 * `logger.child(bindings)`, made only when something is logged through it at a level the logger
 * writes: a pino child (with redaction) costs a few microseconds, too much to make per message on
 * a path that almost never logs. A disabled level is a no-op; anything else reaches the real child.
 */
export function lazyChild(logger: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | undefined;
  const real = () => (child ??= logger.child(bindings));
  return new Proxy(logger, {
    get(_target, property) {
      if (child === undefined && typeof property === "string" && LEVELS.has(property) && !logger.isLevelEnabled(property)) return noop;
      const value = Reflect.get(real(), property) as unknown;
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(real()) : value;
    },
  });
}

function noop(): void {}
