/**
 * The logger each HTTP request gets (`request.log`, bound to its request id), made only when the
 * request logs something. Fastify asks for one per request; a pino child with the redaction this
 * logger carries costs more than the rest of a message POST's logging together, and almost no
 * request logs anything (request logging is off).
 */
import type { FastifyBaseLogger } from "fastify";

type Bindings = Parameters<FastifyBaseLogger["child"]>[0];
type ChildOptions = Parameters<FastifyBaseLogger["child"]>[1];

export function lazyRequestLogger(parent: FastifyBaseLogger, bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
  let child: FastifyBaseLogger | undefined;
  const real = () => (child ??= parent.child(bindings, options));
  // A level the parent leaves out (pino tells) is dropped here, child or not.
  const enabled = (level: string) => (parent as { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled?.(level) ?? true;
  const method =
    (level: "info" | "error" | "debug" | "fatal" | "warn" | "trace") =>
    (...args: unknown[]) => {
      if (child === undefined && !enabled(level)) return;
      (real()[level] as (...values: unknown[]) => void)(...args);
    };
  return {
    get level() {
      return (child ?? parent).level;
    },
    set level(level: string) {
      real().level = level;
    },
    info: method("info"),
    error: method("error"),
    debug: method("debug"),
    fatal: method("fatal"),
    warn: method("warn"),
    trace: method("trace"),
    silent: () => undefined,
    child: (more, moreOptions) => real().child(more, moreOptions),
  } as FastifyBaseLogger;
}
