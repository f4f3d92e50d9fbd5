import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { lazyRequestLogger } from "../../../src/api/lazy-request-logger.js";

function recordingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString("utf8")) as Record<string, unknown>);
      done();
    },
  });
  const logger = pino({ level: "info", redact: ["token"] }, stream);
  let children = 0;
  const child = logger.child.bind(logger);
  logger.child = ((...args: Parameters<typeof child>) => {
    children += 1;
    return child(...args);
  }) as typeof logger.child;
  return { logger, lines, children: () => children };
}

describe("the per-request logger", () => {
  it("makes no child logger for a request that logs nothing, or only below the level", () => {
    const { logger, lines, children } = recordingLogger();
    const log = lazyRequestLogger(logger, { reqId: "req-1" });
    log.debug("not at this level");
    log.trace("nor this");
    expect(children()).toBe(0);
    expect(lines).toEqual([]);
    expect(log.level).toBe("info");
  });

  it("logs with the request's bindings (and the parent's redaction) once it logs", async () => {
    const { logger, lines, children } = recordingLogger();
    const log = lazyRequestLogger(logger, { reqId: "req-2" });
    log.info({ token: "secret-value" }, "first");
    log.warn("second");
    await new Promise((resolve) => setImmediate(resolve));
    expect(children()).toBe(1);
    expect(lines.map((line) => [line.reqId, line.msg, line.token])).toEqual([
      ["req-2", "first", "[Redacted]"],
      ["req-2", "second", undefined],
    ]);
  });
});
