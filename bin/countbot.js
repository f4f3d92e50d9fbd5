#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx, so `npx countbot` works right after
// `npm install` with no build step.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
// A command that failed (or finished) leaves nothing running: whatever a half-started process left
// open (a socket, a timer) does not keep it alive past a short grace for output to drain.
setTimeout(() => process.exit(), 2_000).unref();
