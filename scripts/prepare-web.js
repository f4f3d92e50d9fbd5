#!/usr/bin/env node
// `npm install` (and `npm ci`) in the project runs this as `prepare`: it builds the web console
// into web/dist, which `countbot start` and `countbot gateway` serve at `/`. An install without
// the dev dependencies (`npm ci --omit=dev`, the Docker image's dependency stage) has no Vite:
// then it says so in one line and leaves the build to `npm run build:web`, and the gateway
// serves a page saying how to build the console until there is one.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const config = path.join(root, "web", "vite.config.ts");
if (!existsSync(config)) {
  console.log("countbot: no web/ folder here: the web console is not built");
  process.exit(0);
}
let vite;
try {
  const manifest = createRequire(path.join(root, "package.json")).resolve("vite/package.json");
  vite = path.join(path.dirname(manifest), JSON.parse(readFileSync(manifest, "utf8")).bin.vite);
} catch {
  console.log("countbot: Vite is not installed (dev dependencies left out): the web console is not built; `npm run build:web` builds it");
  process.exit(0);
}
const result = spawnSync(process.execPath, [vite, "build", "--config", config], { cwd: root, stdio: "inherit" });
if (result.status !== 0) console.error("countbot: building the web console failed (see above); `npm run build:web` tries again");
process.exit(result.status ?? 1);
