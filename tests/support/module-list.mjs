// Preloaded with `node --import` (NODE_OPTIONS): at exit, writes the file of every module the
// process loaded to the file named by MODULE_LIST_FILE, as a JSON array: the CommonJS ones
// (require.cache, which also holds the CommonJS packages that ES modules imported) and, through a
// synchronous load hook, every ES module (the project's own, compiled in dist/ or the sources run
// through tsx), which no registry lists.
import { writeFileSync } from "node:fs";
import { createRequire, registerHooks } from "node:module";
import { fileURLToPath } from "node:url";

const { cache } = createRequire(import.meta.url);
const target = process.env.MODULE_LIST_FILE;
if (target) {
  const loaded = new Set();
  registerHooks({
    load(url, context, nextLoad) {
      if (url.startsWith("file:")) loaded.add(fileURLToPath(url));
      return nextLoad(url, context);
    },
  });
  process.on("exit", () => writeFileSync(target, JSON.stringify([...new Set([...Object.keys(cache), ...loaded])])));
}
