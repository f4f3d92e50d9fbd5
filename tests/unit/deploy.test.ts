/**
 * The deployment files, checked without a Docker engine: docker-compose.yml parsed as Compose
 * reads it (YAML merge keys on), the Dockerfile and .dockerignore read line by line.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { channelPlugins } from "../../channels/index.js";
import { environmentOverridesOf } from "../../src/config/load.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const read = (file: string) => readFileSync(path.join(root, file), "utf8");

interface Service {
  env_file?: Array<string | { path: string; required?: boolean }>;
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  ports?: unknown[];
  volumes?: string[];
  container_name?: string;
  depends_on?: Record<string, { condition?: string }>;
  healthcheck?: { test?: string[]; disable?: boolean };
}

const compose = parse(read("docker-compose.yml"), { merge: true }) as { services: Record<string, Service>; volumes: Record<string, unknown> };
const { redis, gateway, worker } = compose.services as Record<"redis" | "gateway" | "worker", Service>;

/** The Dockerfile as instructions: continuation lines joined, comments dropped. */
const instructions = read("Dockerfile")
  .replace(/\\\n/g, " ")
  .split("\n")
  .map((line) => line.trim())
  .filter((line) => line !== "" && !line.startsWith("#"));

describe("Dockerfile", () => {
  it("installs bubblewrap in the runtime image, so exec can be sandboxed", () => {
    const runtime = instructions.slice(instructions.findIndex((line) => /^FROM .* AS runtime$/.test(line)));
    expect(runtime.some((line) => /^RUN apt-get update .*apt-get install .*bubblewrap/.test(line))).toBe(true);
  });
});

describe("docker-compose.yml", () => {
  it("runs Redis 7 with AOF, noeviction, a volume and a ping health check", () => {
    expect(redis.image).toMatch(/^redis:7/);
    const command = redis.command!.join(" ");
    expect(command).toContain("--appendonly yes");
    expect(command).toContain("--maxmemory-policy noeviction");
    expect(redis.volumes?.some((volume) => volume.endsWith(":/data"))).toBe(true);
    expect(redis.healthcheck?.test).toEqual(["CMD", "redis-cli", "ping"]);
    expect(redis.ports).toBeUndefined();
  });

  it("runs the gateway and the worker from the same image with their commands", () => {
    expect(gateway.command).toEqual(["gateway"]);
    expect(worker.command).toEqual(["worker"]);
    expect(gateway.image).toBe(worker.image);
    expect(gateway.build).toEqual(worker.build);
  });

  it("lets the worker build exec's bubblewrap sandbox (user namespaces need the seccomp filter lifted)", () => {
    // Without a sandbox exec refuses every command, so the shipped compose file must allow it.
    expect((worker as { security_opt?: string[] }).security_opt).toContain("seccomp=unconfined");
  });

  it("lets the worker scale: no container_name, no published ports", () => {
    expect(worker.container_name).toBeUndefined();
    expect(worker.ports).toBeUndefined();
    expect(gateway.container_name).toBeUndefined();
  });

  it("publishes the API port of the gateway and passes it the API token from .env", () => {
    // The host's loopback only: the API does not face the network unless the operator says so.
    expect(gateway.ports).toEqual(["127.0.0.1:${COUNTBOT_API_PORT:-8787}:${COUNTBOT_API_PORT:-8787}"]);
    expect(gateway.environment?.COUNTBOT_API_PORT).toBe("${COUNTBOT_API_PORT:-8787}");
    expect(gateway.environment?.COUNTBOT_API_TOKEN).toMatch(/^\$\{COUNTBOT_API_TOKEN:\?/);
    expect(gateway.environment?.COUNTBOT_API_HOST).toBe("0.0.0.0");
    expect(worker.environment?.COUNTBOT_API_TOKEN).toBeUndefined();
  });

  it("points both at the compose Redis and waits for it to be healthy", () => {
    for (const service of [gateway, worker]) {
      expect(service.environment?.REDIS_URL).toBe("redis://redis:6379");
      expect(service.depends_on?.redis?.condition).toBe("service_healthy");
    }
  });

  it("shares the workspace and data volumes, mounted where the environment says", () => {
    expect(gateway.volumes).toEqual(worker.volumes);
    for (const service of [gateway, worker]) {
      const mounts = new Map(service.volumes!.map((volume) => [volume.split(":")[1], volume.split(":")[0]]));
      expect(mounts.get(service.environment!.COUNTBOT_WORKSPACE!)).toBe("workspace");
      expect(mounts.get(service.environment!.COUNTBOT_DATA_DIR!)).toBe("data");
      expect(service.volumes).toContain("./config:/app/config:ro");
    }
    expect(Object.keys(compose.volumes)).toEqual(expect.arrayContaining(["workspace", "data"]));
  });

  it("checks the health of every service", () => {
    for (const service of [redis, gateway, worker]) {
      expect(service.healthcheck?.disable).not.toBe(true);
      expect(service.healthcheck?.test?.length).toBeGreaterThan(1);
    }
    expect(gateway.healthcheck!.test!.join(" ")).toContain("/health");
    expect(worker.healthcheck!.test!.join(" ")).toContain("REDIS_URL");
  });

  it("keeps `$` out of the health checks, where Compose would substitute it", () => {
    for (const service of [redis, gateway, worker]) expect(service.healthcheck!.test!.join(" ")).not.toContain("$");
  });
});

describe(".env and .env.example", () => {
  const example = read(".env.example");
  /** The names .env.example gives a line to, set or commented out (`# DEEPSEEK_API_KEY=`). */
  const listed = new Set([...example.matchAll(/^(?:# )?([A-Z][A-Z0-9_]*)=/gm)].map((match) => match[1]!));
  // Named in the README but not an operator's setting: what the exec sandbox strips from commands,
  // a reply marker, a benchmark switch, a Discord message flag.
  const notSettings = new Set(["BASH_ENV", "JAVA_TOOL_OPTIONS", "NODE_OPTIONS", "NODE_PATH", "HEARTBEAT_OK", "BENCH_SCALE_COMPARE_BIN", "IS_VOICE_MESSAGE"]);

  it("passes the operator's .env to the gateway and the workers, without requiring one", () => {
    for (const service of [gateway, worker]) expect(service.env_file).toEqual([{ path: ".env", required: false }]);
    // What compose sets itself still wins over .env.
    expect(worker.environment).toMatchObject({ REDIS_URL: "redis://redis:6379", COUNTBOT_DATA_DIR: "/data", COUNTBOT_WORKSPACE: "/workspace" });
  });

  it("lists every variable the README names", () => {
    const readme = read("README.md");
    const named = new Set([...readme.matchAll(/`([A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9])`/g), ...readme.matchAll(/\$\{([A-Z][A-Z0-9]*_[A-Z0-9_]*)\}/g)].map((match) => match[1]!));
    expect(named.size).toBeGreaterThan(40);
    for (const variable of named) if (!notSettings.has(variable)) expect(listed, `${variable} (named in README.md) in .env.example`).toContain(variable);
  });

  it("lists every variable the code reads and every ${VAR} of the example config", () => {
    for (const { variable } of environmentOverridesOf(channelPlugins)) expect(listed, variable).toContain(variable);
    for (const match of read("config/countbot.example.json").matchAll(/\$\{([A-Z][A-Z0-9_]*)\}/g)) expect(listed, match[1]).toContain(match[1]);
  });

  it("keeps .env out of git and out of the image", () => {
    expect(read(".gitignore").split("\n")).toContain(".env");
    expect(read(".dockerignore").split("\n")).toContain(".env");
  });
});

describe("Dockerfile", () => {
  const froms = instructions.filter((line) => line.startsWith("FROM "));

  it("builds in stages on Node 24 (the current LTS, above the engines floor) and installs from the lock file", () => {
    expect(froms.length).toBeGreaterThanOrEqual(2);
    for (const from of froms) expect(from).toMatch(/^FROM node:24[-.\w]* AS \w+$/);
    const engines = (JSON.parse(read("package.json")) as { engines: { node: string } }).engines.node;
    expect(engines).toBe(">=22.15");
    expect(instructions.some((line) => /^RUN .*npm ci\b/.test(line))).toBe(true);
    expect(instructions).toContain("COPY --from=deps /app/node_modules ./node_modules");
  });

  it("runs as the non-root user node, through bin/countbot.js, with a health check", () => {
    const runtime = instructions.slice(instructions.lastIndexOf(froms.at(-1)!));
    const users = runtime.filter((line) => line.startsWith("USER "));
    expect(users.at(-1)).toBe("USER node");
    expect(runtime.indexOf(users.at(-1)!)).toBeLessThan(runtime.findIndex((line) => line.startsWith("ENTRYPOINT ")));
    expect(runtime).toContain('ENTRYPOINT ["node", "bin/countbot.js"]');
    expect(runtime.find((line) => line.startsWith("HEALTHCHECK "))).toContain("/health");
  });

  it("copies only paths that exist", () => {
    const sources = instructions
      .filter((line) => line.startsWith("COPY ") && !line.includes("--from="))
      .flatMap((line) => line.split(/\s+/).slice(1, -1));
    expect(sources).toEqual(expect.arrayContaining(["src", "channels", "bin", "config", "package.json", "package-lock.json", "tsconfig.json"]));
    for (const source of sources) expect(existsSync(path.join(root, source)), source).toBe(true);
  });

  it("keeps secrets and the host's node_modules out of the build context", () => {
    const ignored = read(".dockerignore").split("\n").map((line) => line.trim());
    expect(ignored).toEqual(expect.arrayContaining(["node_modules", ".env", "config/countbot.json", ".git"]));
  });
});
