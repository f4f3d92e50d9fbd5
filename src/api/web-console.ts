/**
 * The web console's files (the page Vite builds from `web/` into `web/dist`), served at `/` by
 * the API server as public pages: the login form must load before the browser has a cookie, and
 * everything the page then fetches is behind the token.
 *
 * - `index.html` (also at `/`): `Cache-Control: no-cache`, so a rebuilt console is picked up at once.
 * - `/assets/*`: Vite names them by a hash of their content, so they are cached for a year, immutable.
 * - A directory without a build: one warning at start, and `/` answers a page that says how to
 *   build it (503), rather than a 404 that looks like a broken server.
 *
 * The files are listed once when the server starts (no wildcard route): a path that is not one of
 * them is the API's JSON 404, and nothing outside the directory can be asked for.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";

export interface WebConsoleOptions {
  /** The built console: a directory holding `index.html` and `assets/`. */
  directory: string;
  /** What to tell the operator to run when the directory holds no build. */
  buildCommand: string;
  logger: Logger;
}

/** Hashed file names never change content: a year, immutable. */
const ASSET_CACHE = "public, max-age=31536000, immutable";
/** Revalidated every time (an ETag answers 304 when it did not change). */
const PAGE_CACHE = "no-cache";

/** Registers the console's routes on `app` (the server's root: no token). Returns whether a build was found. */
export function registerWebConsole(app: FastifyInstance, options: WebConsoleOptions): boolean {
  const { directory, logger } = options;
  if (!existsSync(path.join(directory, "index.html"))) {
    logger.warn({ directory }, `web console not built: run \`${options.buildCommand}\`; / answers a page that says so`);
    app.get("/", async (_request, reply) => reply.code(503).header("cache-control", PAGE_CACHE).type("text/html; charset=utf-8").send(notBuiltPage(options.buildCommand)));
    return false;
  }
  const assets = path.join(directory, "assets") + path.sep;
  void app.register(fastifyStatic, {
    root: directory,
    prefix: "/",
    wildcard: false,
    index: ["index.html"],
    // bull-board serves its own files with this plugin in its scope: only one may decorate replies.
    decorateReply: false,
    cacheControl: false,
    setHeaders: (reply, file) => void reply.header("cache-control", file.startsWith(assets) ? ASSET_CACHE : PAGE_CACHE),
  });
  return true;
}

function notBuiltPage(buildCommand: string): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>CountBot: web console not built</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; padding: 0 1rem; line-height: 1.5">
<h1>The web console is not built</h1>
<p>This CountBot serves its API, but the console's files are missing. In the project folder, run</p>
<pre style="background: #f3f3f3; padding: .75rem">${buildCommand}</pre>
<p>(<code>npm install</code> builds it too), then restart CountBot. The API itself works without it: <a href="/health">/health</a>.</p>
</body>
</html>
`;
}
