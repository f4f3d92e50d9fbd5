/** The logger: JSON or pretty, secrets scrubbed either way, library console warnings routed in once. */
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger, lazyChild, routeConsoleWarnings } from "../../src/logger.js";

function capture(): { stream: PassThrough; text: () => string } {
  const stream = new PassThrough();
  let text = "";
  stream.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
  return { stream, text: () => text };
}

let undo: (() => void) | undefined;
afterEach(() => {
  undo?.();
  undo = undefined;
});

describe("createLogger", () => {
  it("writes one JSON object a line, or lines for people, and scrubs secrets from both", () => {
    for (const pretty of [false, true]) {
      const out = capture();
      const logger = createLogger({ level: "info", secrets: ["sk-very-secret-value"], destination: out.stream, pretty });
      logger.info({ sessionKey: "telegram:1", detail: "key sk-very-secret-value used" }, "model call failed");
      const text = out.text();
      expect(text).not.toContain("sk-very-secret-value");
      expect(text).toContain("model call failed");
      if (pretty) {
        expect(() => JSON.parse(text)).toThrow();
        expect(text).toMatch(/INFO/);
        expect(text).toContain("sessionKey");
      } else {
        expect(JSON.parse(text)).toMatchObject({ level: 30, msg: "model call failed", sessionKey: "telegram:1" });
      }
    }
  });
});

describe("lazyChild", () => {
  it("makes the child only when a written level is used, and then logs with its bindings and the parent's scrubbing", () => {
    const out = capture();
    const logger = createLogger({ level: "info", secrets: ["sk-very-secret-value"], destination: out.stream });
    let made = 0;
    const child = logger.child.bind(logger);
    logger.child = ((...args: Parameters<typeof child>) => {
      made += 1;
      return child(...args);
    }) as typeof logger.child;

    const log = lazyChild(logger, { sessionKey: "web:1" });
    log.debug("not written at info");
    log.trace({ detail: 1 }, "nor this");
    expect(made).toBe(0);
    expect(out.text()).toBe("");

    log.warn({ detail: "sk-very-secret-value" }, "something odd");
    log.info("and more");
    expect(made).toBe(1);
    const lines = out.text().trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toMatchObject([
      { level: 40, msg: "something odd", sessionKey: "web:1" },
      { level: 30, msg: "and more", sessionKey: "web:1" },
    ]);
    expect(out.text()).not.toContain("sk-very-secret-value");
    expect(log.isLevelEnabled("debug")).toBe(false);
    expect(log.level).toBe("info");
  });
});

describe("routeConsoleWarnings", () => {
  it("logs what a library prints with console.warn, each message once", () => {
    const out = capture();
    const logger = createLogger({ level: "info", destination: out.stream });
    undo = routeConsoleWarnings(logger);
    for (let index = 0; index < 6; index += 1) console.warn("IMPORTANT! Eviction policy is %s. It should be \"noeviction\"", "allkeys-lru");
    console.error("another problem");
    const lines = out.text().trim().split("\n").map((line) => JSON.parse(line) as { level: number; msg: string; source: string });
    expect(lines).toEqual([
      expect.objectContaining({ level: 40, source: "console", msg: 'IMPORTANT! Eviction policy is allkeys-lru. It should be "noeviction"' }),
      expect.objectContaining({ level: 50, source: "console", msg: "another problem" }),
    ]);
  });
});
