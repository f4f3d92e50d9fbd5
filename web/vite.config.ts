/**
 * Builds the web console into web/dist, which the gateway serves at `/` (src/api/web-console.ts).
 * `npm run build:web` runs it, and `npm install` does through `prepare`. No inline script and no
 * CDN: the page must run under the API's Content-Security-Policy (`script-src 'self'`).
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/",
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // Vite inlines small assets as data: URLs and can preload with an inline script: neither.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: "es2022",
    sourcemap: false,
  },
});
