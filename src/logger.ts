/**
 * Structured logs (pino) on stderr. Secret-bearing fields are redacted by path, and the known
 * secret values of the config are scrubbed from every line, so no token reaches a log. A line
 * logged while a span is active carries its `trace_id` and `span_id` (src/tracing.ts).
 */
import { Writable } from "node:stream";
import { format } from "node:util";
import pino, { type Logger } from "pino";
import pretty from "pino-pretty";
import { createRedactor } from "./config/mask.js";
import { activeTraceFields } from "./tracing.js";

export interface LoggerOptions {
  level: string;
  /** Secret values to scrub from every line (from collectSecrets(config)). */
  secrets?: string[];
  /** Where lines go. Default: stderr. */
  destination?: NodeJS.WritableStream;
  /** Lines for people (time, level, message, then the fields) instead of JSON. */
  pretty?: boolean;
  /** JSON lines written once per turn of the event loop, warnings and worse at once (services): see batchedLines. */
  batch?: boolean;
}

/** Fields whose value is a secret, at the top of a log record or one level down (`err.token`, `config.apiKey`). */
const SECRET_FIELDS = new Set(["apiKey", "token", "appSecret", "password"]);
const CENSOR = "[redacted]";

/**
 * The record with its secret fields censored, and `headers.authorization` (at the top or one level
 * down). Copies only what changes, and only when something does: pino's own path redaction
 * cloned every record it was given, a large share of what a worker allocated per turn.
 */
export function censorSecrets(record: Record<string, unknown>, depth = 0): Record<string, unknown> {
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(record)) {
    const value = record[key];
    let replaced = value;
    if (SECRET_FIELDS.has(key)) replaced = value === undefined ? value : CENSOR;
    else if (key === "headers" && isRecord(value) && "authorization" in value) replaced = { ...value, authorization: CENSOR };
    else if (depth === 0 && isRecord(value)) replaced = censorSecrets(value, 1);
    if (replaced !== value) {
      copy ??= copyOf(record);
      copy[key] = replaced;
    }
  }
  return copy ?? record;
}

/** A shallow copy; an Error stays an Error of its class, with its message and stack (as pino serializes it). */
function copyOf(record: Record<string, unknown>): Record<string, unknown> {
  if (!(record instanceof Error)) return { ...record };
  const copy = Object.create(Object.getPrototypeOf(record) as object, Object.getOwnPropertyDescriptors(record)) as Record<string, unknown>;
  // Node 22+ keeps `stack` behind an accessor bound to the original error: copied, it reads empty.
  Object.defineProperty(copy, "stack", { value: record.stack, enumerable: false, writable: true, configurable: true });
  return copy;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** pino's JSON lines open with their level: `{"level":30,`. */
const LEVEL_AT = '{"level":'.length;
const WARN = 40;

/**
 * JSON lines written together once per turn of the event loop, for a service's stderr. A busy
 * worker logs a line a turn ("turn finished"): a write each was a system call per message, most of
 * the writes a worker made (bench/README). A warning or worse goes out at once, after the lines
 * held before it; what is held goes out before the process exits.
 */
export function batchedLines(sink: (text: string) => void, later: (flush: () => void) => void = setImmediate): { write(line: string): boolean } {
  let held: string[] = [];
  const flush = () => {
    if (held.length === 0) return;
    const text = held.join("");
    held = [];
    unflushed.delete(flush);
    sink(text);
  };
  return {
    write(line: string) {
      held.push(line);
      if (Number(line.slice(LEVEL_AT, LEVEL_AT + 2)) >= WARN) flush();
      else if (held.length === 1) {
        holdUntilExit(flush);
        later(flush);
      }
      return true;
    },
  };
}

/** The flushes of batches holding lines, run if the process exits first. */
const unflushed = new Set<() => void>();
let exitHooked = false;

function holdUntilExit(flush: () => void): void {
  unflushed.add(flush);
  if (exitHooked) return;
  exitHooked = true;
  process.once("exit", () => {
    for (const pending of [...unflushed]) pending();
  });
}

export function createLogger(options: LoggerOptions): Logger {
  const destination = options.destination ?? process.stderr;
  // Secrets are scrubbed from the JSON line first; the pretty printer then formats what is left,
  // one line a record (its fields after the message): a field a line made a turn ~9 lines long.
  const target: NodeJS.WritableStream = options.pretty
    ? pretty({
        destination,
        sync: true,
        colorize: Boolean((destination as { isTTY?: boolean }).isTTY) && !process.env.NO_COLOR,
        translateTime: "SYS:HH:MM:ss.l",
        ignore: "pid,hostname",
        singleLine: true,
      })
    : options.batch
      ? (batchedLines((text) => destination.write(text)) as unknown as NodeJS.WritableStream)
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
  // A line logged inside a span names its trace (`trace_id`, `span_id`): logs and traces join up.
  const logger = pino({ level: options.level, mixin: activeTraceFields, formatters: { log: (record) => censorSecrets(record) } }, stream);
  // Children are made from their parent's prototype chain, so this covers the bindings of every
  // descendant (pino resets a bindings formatter for children).
  const child = logger.child;
  logger.child = function (this: Logger, bindings, childOptions) {
    return child.call(this, censorSecrets(bindings), childOptions);
  } as Logger["child"];
  return logger;
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
