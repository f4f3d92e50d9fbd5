#!/usr/bin/env node
// `npm run build:server` (and so `npm install`, through `prepare`): compiles src/ and channels/
// with tsc into dist/ (git-ignored), copies the Lua scripts beside the code that loads them, and
// leaves dist/build-stamp.json, which bin/countbot.js compares with the sources: it runs the build
// while no source is newer, else the sources through tsx. Type checking is `npm run typecheck`'s
// job; this only transpiles (tsc --noCheck), so an install takes seconds, not a minute.
//
// Without TypeScript (an install with --omit=dev, as the Dockerfile's runtime stage does), there
// is nothing to build with: it says so and succeeds, and bin/countbot.js runs the sources.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.join(root, "dist");

let tsc;
try {
  tsc = createRequire(path.join(root, "package.json")).resolve("typescript/bin/tsc");
} catch {
  console.log("countbot: TypeScript is not installed (a production install): no build; bin/countbot.js runs the sources through tsx");
  process.exit(0);
}

rmSync(dist, { recursive: true, force: true });
const compiled = spawnSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.build.json"), "--noCheck"], { stdio: "inherit" });
if (compiled.status !== 0) {
  rmSync(dist, { recursive: true, force: true });
  console.error("countbot: the build failed (see above); bin/countbot.js runs the sources through tsx");
  process.exit(compiled.status ?? 1);
}

// Lua scripts are read at run time from beside the module that loads them (src/**/lua/).
for (const directory of ["src", "channels"]) {
  for (const entry of readdirSync(path.join(root, directory), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith(".lua")) continue;
    const source = path.join(entry.parentPath ?? entry.path, entry.name);
    const target = path.join(dist, path.relative(root, source));
    mkdirSync(path.dirname(target), { recursive: true });
    copyFileSync(source, target);
  }
}

if (!existsSync(path.join(dist, "src", "cli", "main.js"))) {
  console.error("countbot: the build left no dist/src/cli/main.js");
  process.exit(1);
}
writeFileSync(path.join(dist, "build-stamp.json"), `${JSON.stringify({ builtAt: new Date().toISOString(), node: process.version })}\n`);
console.log("countbot: built into dist/");
