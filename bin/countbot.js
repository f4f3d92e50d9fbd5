#!/usr/bin/env node
// Runs CountBot's build in dist/ when it is current, else the TypeScript sources through tsx, so
// `npx countbot` works right after `npm install` (whose `prepare` script builds dist/) and a
// checkout whose sources changed since runs them as they are. Compiled, a process starts in about
// 60% of the time and CPU (README, "Runtime: compiled or through tsx").
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildIsCurrent } from "./build-current.js";

// A reader that stops early (`countbot --help | head`) closes the pipe: that ends the command
// quietly instead of with an EPIPE stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (error) => {
    if (error.code !== "EPIPE") throw error;
    process.exit(process.exitCode ?? 0);
  });
}

let main;
if (buildIsCurrent(path.resolve(path.dirname(fileURLToPath(import.meta.url)), ".."))) {
  ({ main } = await import("../dist/src/cli/main.js"));
} else {
  const { register } = await import("tsx/esm/api");
  register();
  ({ main } = await import("../src/cli/main.ts"));
}
process.exitCode = await main(process.argv.slice(2));
// A command that failed (or finished) leaves nothing running: whatever a half-started process left
// open (a socket, a timer) does not keep it alive past a short grace for output to drain.
setTimeout(() => process.exit(), 2_000).unref();
