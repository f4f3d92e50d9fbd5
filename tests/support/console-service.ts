/**
 * `countbot start` as the web console's tests run it: one process with a token of the test's own,
 * a data directory and workspace under the test's temp root, the fake model server's root passed
 * explicitly. Resolves once it listens; the page is served at `base`.
 */
import { readdir, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type ServiceProcess, startService } from "./processes.js";

const web = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../web");

/**
 * The console the gateway serves is web/dist, built by `npm install` (prepare) or `npm run build:web`.
 * A test of a stale build would test old code: refuse with what to run.
 */
export async function assertConsoleBuilt(): Promise<void> {
  const built = await stat(path.join(web, "dist", "index.html")).catch(() => undefined);
  if (!built) throw new Error("web/dist is missing: run `npm run build:web` (npm install runs it too)");
  const sources = [path.join(web, "index.html"), path.join(web, "vite.config.ts"), ...(await readdir(path.join(web, "src"), { recursive: true })).map((file) => path.join(web, "src", file))];
  for (const source of sources) {
    const info = await stat(source);
    if (info.isFile() && info.mtimeMs > built.mtimeMs) throw new Error(`web/dist is older than ${path.relative(web, source)}: run \`npm run build:web\``);
  }
}

export interface ConsoleService {
  service: ServiceProcess;
  base: string;
  dataDir: string;
  workspace: string;
  /** An API call from the test, with the bearer token. */
  api<T>(route: string, init?: { method?: string; body?: unknown }): Promise<T>;
}

export async function startConsoleService(options: { root: string; token: string; modelUrl: string; config?: Record<string, unknown>; env?: Record<string, string> }): Promise<ConsoleService> {
  await assertConsoleBuilt();
  const configFile = path.join(options.root, "countbot.json");
  await writeFile(configFile, JSON.stringify(options.config ?? {}));
  const dataDir = path.join(options.root, "data");
  const workspace = path.join(options.root, "workspace");
  const service = startService(["start"], {
    HOME: options.root,
    COUNTBOT_CONFIG: configFile,
    COUNTBOT_DATA_DIR: dataDir,
    COUNTBOT_WORKSPACE: workspace,
    COUNTBOT_API_PORT: "0",
    COUNTBOT_API_TOKEN: options.token,
    OPENAI_API_KEY: "sk-console-0123456789",
    OPENAI_BASE_URL: options.modelUrl,
    LOG_LEVEL: "info",
    ...options.env,
  });
  const base = String((await service.waitForLog(/countbot started/, 60_000)).url);
  return {
    service,
    base,
    dataDir,
    workspace,
    async api<T>(route: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
      const response = await fetch(`${base}${route}`, {
        method: init.method ?? "GET",
        headers: { authorization: `Bearer ${options.token}`, ...(init.body === undefined ? {} : { "content-type": "application/json" }) },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      });
      if (!response.ok) throw new Error(`${init.method ?? "GET"} ${route}: ${response.status} ${await response.text()}`);
      return (await response.json()) as T;
    },
  };
}
