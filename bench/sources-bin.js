#!/usr/bin/env node
// bin/countbot.js as it runs when dist/ is missing or stale: the TypeScript sources through tsx.
// For bench/runtime.ts, which measures both ways in one run.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
setTimeout(() => process.exit(), 2_000).unref();
