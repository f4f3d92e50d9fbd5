// Preloaded with `node --import` (NODE_OPTIONS): at exit, writes the file of every CommonJS module
// the process loaded (require.cache, which also holds the CommonJS packages that ES modules
// imported) to the file named by MODULE_LIST_FILE, as a JSON array.
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const { cache } = createRequire(import.meta.url);
const target = process.env.MODULE_LIST_FILE;
if (target) process.on("exit", () => writeFileSync(target, JSON.stringify(Object.keys(cache))));
