/** The logger: JSON or pretty, secrets scrubbed either way, library console warnings routed in once. */
import { spawnSync } from "node:child_process";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { batchedLines, censorSecrets, createLogger, lazyChild, routeConsoleWarnings } from "../../src/logger.js";

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

describe("a service's lines, batched", () => {
  const line = (level: number, msg: string) => `${JSON.stringify({ level, msg })}\n`;

  it("writes the lines of one turn of the event loop together, in order", () => {
    const written: string[] = [];
    let scheduled: (() => void) | undefined;
    const lines = batchedLines((text) => written.push(text), (flush) => (scheduled = flush));
    for (const msg of ["a", "b", "c"]) lines.write(line(30, msg));
    expect(written).toEqual([]);
    scheduled!();
    expect(written).toEqual([line(30, "a") + line(30, "b") + line(30, "c")]);
    // The next turn's lines wait for their own flush.
    lines.write(line(20, "d"));
    expect(written).toHaveLength(1);
    scheduled!();
    expect(written).toEqual([line(30, "a") + line(30, "b") + line(30, "c"), line(20, "d")]);
  });

  it("writes a warning or worse at once, after the lines held before it", () => {
    for (const level of [40, 50, 60]) {
      const written: string[] = [];
      const lines = batchedLines((text) => written.push(text), () => undefined);
      lines.write(line(30, "before"));
      lines.write(line(level, "bad"));
      expect(written).toEqual([line(30, "before") + line(level, "bad")]);
    }
  });

  it("reach the destination in the next turn of the event loop through createLogger, secrets scrubbed", async () => {
    const out = capture();
    const logger = createLogger({ level: "info", secrets: ["sk-very-secret-value"], destination: out.stream, batch: true });
    logger.info({ detail: "sk-very-secret-value" }, "one");
    logger.info("two");
    expect(out.text()).toBe("");
    await new Promise((resolve) => setImmediate(resolve));
    const records = out.text().trimEnd().split("\n").map((text) => JSON.parse(text) as { msg: string; detail?: string });
    expect(records.map((record) => record.msg)).toEqual(["one", "two"]);
    expect(out.text()).not.toContain("sk-very-secret-value");
  });

  it("are written before the process exits", () => {
    const script = `const { createLogger } = await import(${JSON.stringify(new URL("../../src/logger.ts", import.meta.url).href)}); const logger = createLogger({ level: "info", batch: true }); logger.info("last words"); process.exit(0);`;
    const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8", stdio: ["ignore", "ignore", "pipe"] });
    expect(run.status).toBe(0);
    expect(run.stderr).toContain("last words");
  });
});

describe("pretty logs", () => {
  it("print a record on one line, its fields after the message (a turn's record was 8 lines)", () => {
    const out = capture();
    const logger = createLogger({ level: "info", destination: out.stream, pretty: true });
    const turn = { stopReason: "completed", iterations: 1, toolCalls: 0, inputTokens: 10, outputTokens: 3, model: "openai/gpt-4o-mini" };
    logger.child({ session: "web:room" }).info(turn, "turn finished");
    const lines = out.text().trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/INFO.*turn finished.*"session":"web:room".*"stopReason":"completed".*"model":"openai\/gpt-4o-mini"/);
  });
});

describe("secret fields", () => {
  it("censors apiKey, token, appSecret and password at the top and one level down, and headers.authorization, in records and bindings", () => {
    const out = capture();
    const logger = createLogger({ level: "info", destination: out.stream });
    const error = Object.assign(new Error("upstream refused"), { token: "error-token-1" });
    logger.info({ apiKey: "top-key-1", config: { appSecret: "nested-secret-1", name: "kept" }, headers: { authorization: "Bearer top-auth-1", accept: "json" } }, "one");
    logger.info({ request: { headers: { authorization: "Bearer nested-auth-1" } }, err: error, list: ["plain"] }, "two");
    logger.child({ password: "binding-password-1", component: "x" }).warn({ detail: { token: "child-token-1" } }, "three");
    logger.info({ sessionKey: "web:1", count: 2 }, "nothing secret");
    const text = out.text();
    for (const secret of ["top-key-1", "nested-secret-1", "top-auth-1", "nested-auth-1", "error-token-1", "binding-password-1", "child-token-1"]) expect(text).not.toContain(secret);
    const [one, two, three, four] = text.trim().split("\n").map((line) => JSON.parse(line) as Record<string, { stack?: string } & Record<string, unknown>>);
    expect(one).toMatchObject({ apiKey: "[redacted]", config: { appSecret: "[redacted]", name: "kept" }, headers: { authorization: "[redacted]", accept: "json" } });
    expect(two).toMatchObject({ request: { headers: { authorization: "[redacted]" } }, err: { message: "upstream refused", token: "[redacted]", type: "Error" }, list: ["plain"] });
    expect(two!.err!.stack).toContain("upstream refused");
    expect(three).toMatchObject({ password: "[redacted]", component: "x", detail: { token: "[redacted]" } });
    expect(four).toMatchObject({ sessionKey: "web:1", count: 2 });
  });

  it("leaves the caller's objects as they were", () => {
    const record = { config: { apiKey: "k" }, token: "t" };
    const censored = censorSecrets(record);
    expect(censored).toEqual({ config: { apiKey: "[redacted]" }, token: "[redacted]" });
    expect(record).toEqual({ config: { apiKey: "k" }, token: "t" });
    const plain = { a: 1, nested: { b: 2 } };
    expect(censorSecrets(plain)).toBe(plain);
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
