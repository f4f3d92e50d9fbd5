// Run as `node tracing-probe.mjs <project root>`: loads the whole CLI (main and every command's
// module, so every module a command reaches statically), starts tracing as a worker does (from this process's OTEL_* variables), logs
// one line inside a span, shuts tracing down, and prints the @opentelemetry packages that were
// loaded (seen by a module resolve hook) and the span's trace id, as one JSON line on stdout.
import { registerHooks } from "node:module";

const loaded = new Set();
registerHooks({
  resolve(specifier, context, next) {
    const result = next(specifier, context);
    const match = /node_modules\/@opentelemetry\/([^/]+)\//.exec(result.url);
    if (match) loaded.add(match[1]);
    return result;
  },
});
const root = process.argv[2];
// The build in dist/ when it is current (as bin/countbot.js decides), else the sources through tsx.
const { buildIsCurrent } = await import(`${root}/bin/build-current.js`);
let source = (file) => `${root}/dist/src/${file}.js`;
if (!buildIsCurrent(root)) {
  const { register } = await import("tsx/esm/api");
  register();
  source = (file) => `${root}/src/${file}.ts`;
}
// main loads a command's module when it runs: load every command's, as the commands would.
await import(source("cli/main"));
const { readdirSync } = await import("node:fs");
for (const file of readdirSync(`${root}/src/cli`).filter((name) => name.endsWith("-command.ts"))) await import(source(`cli/${file.replace(/\.ts$/, "")}`));
const { startTracing } = await import(source("app/tracing"));
const { createLogger } = await import(source("logger"));
const { activeTraceFields, inSpan } = await import(source("tracing"));
const logger = createLogger({ level: "info", destination: process.stderr });
const tracing = await startTracing("worker", logger);
const fields = await inSpan("probe", {}, async () => {
  logger.info("inside a span");
  return activeTraceFields();
});
await tracing.shutdown();
process.stdout.write(`${JSON.stringify({ loaded: [...loaded].sort(), enabled: tracing.enabled, traceId: fields.trace_id ?? null })}\n`, () =>
  // What the CLI's modules leave running (timers of libraries) would keep the process a while.
  process.exit(0),
);
