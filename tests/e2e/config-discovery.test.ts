/**
 * Which config file the commands read, as a user meets it: run from a directory without
 * `config/`, they find `~/.countbot/config.json` (where `onboard` writes) and every one of `config`,
 * `doctor`, `status` and `start` names the file it read, or says it read none and where it looked.
 * `--config` goes before or after the command's name; `onboard -c FILE` writes a `$schema` that
 * resolves from where the file is.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startService, stopAllServices } from "../support/processes.js";
import { runCli } from "../support/run-cli.js";

const schemaFile = fileURLToPath(new URL("../../config/countbot.schema.json", import.meta.url));
let root: string;
let home: string;
let elsewhere: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-config-discovery-"));
  home = path.join(root, "home");
  elsewhere = path.join(root, "somewhere", "else");
  await mkdir(elsewhere, { recursive: true });
  await mkdir(home, { recursive: true });
});
afterEach(async () => {
  await stopAllServices();
  await rm(path.join(home, ".countbot"), { recursive: true, force: true });
  await rm(path.join(elsewhere, "config"), { recursive: true, force: true });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function cli(args: string[], env: Record<string, string> = {}) {
  return runCli(args, { env: { HOME: home, COUNTBOT_DATA_DIR: path.join(root, "data"), ...env }, cwd: elsewhere, timeoutMs: 60_000 });
}

/** A port that was just free: bind it, note it, release it. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe("config discovery", () => {
  it("finds the file onboard wrote in ~/.countbot from another directory, and config and doctor name it", async () => {
    const onboarded = await cli(["onboard", "--provider", "openai", "--api-key", "sk-discovery-0123456789", "--model", "gpt-4o-mini", "--telegram-token", "", "--no-test"]);
    expect(onboarded.stderr).toBe("");
    const file = path.join(home, ".countbot", "config.json");
    expect(onboarded.stdout).toContain(`Wrote ${file}`);

    const shown = await cli(["config"]);
    expect(shown.code).toBe(0);
    expect(shown.stderr).toBe(`config: ${file} (found as ~/.countbot/config.json)\n`);
    expect(JSON.parse(shown.stdout)).toMatchObject({ agent: { model: "openai/gpt-4o-mini" }, providers: { openai: { apiKey: "****6789" } } });

    const doctor = await cli(["doctor"]);
    expect(doctor.stdout.split("\n")[0]).toBe(`✓ config: valid: ${file} (found as ~/.countbot/config.json)`);
  });

  it("says it read no file and where it looked, in doctor and config", async () => {
    const looked = `looked for ${path.join(elsewhere, "config", "countbot.json")} and ${path.join(home, ".countbot", "config.json")}`;
    const doctor = await cli(["doctor"]);
    expect(doctor.stdout.split("\n")[0]).toBe(`! config: no config file (${looked}): defaults and environment variables only`);
    expect(doctor.stdout).toMatch(/^✗ model openai\/gpt-4o-mini \(agent\.model, subagents\): No API key/m);
    expect((await cli(["config"])).stderr).toBe(`config: no config file (${looked}): defaults and environment variables only\n`);
  });

  it("takes --config before or after the command, over COUNTBOT_CONFIG", async () => {
    const chosen = path.join(root, "chosen.json");
    const named = path.join(root, "named.json");
    await writeFile(chosen, JSON.stringify({ agent: { maxIterations: 7 } }));
    await writeFile(named, JSON.stringify({ agent: { maxIterations: 9 } }));
    for (const args of [["--config", chosen, "config"], ["config", "--config", chosen], ["config", "-c", chosen]]) {
      const result = await cli(args, { COUNTBOT_CONFIG: named });
      expect(result.stderr, args.join(" ")).toBe(`config: ${chosen} (named by --config)\n`);
      expect((JSON.parse(result.stdout) as { agent: { maxIterations: number } }).agent.maxIterations).toBe(7);
    }
    const missing = await cli(["config", "--config", path.join(root, "missing.json")]);
    expect(missing).toMatchObject({ code: 2, stderr: `countbot: Config file ${path.join(root, "missing.json")} not found\n` });
  });

  it("names the file in status and in start's banner; status without Redis asks the running start's API", async () => {
    const file = path.join(root, "in-process.json");
    const port = await freePort();
    await writeFile(file, JSON.stringify({ api: { port }, tools: { exec: { enabled: false } } }));
    const env = { COUNTBOT_CONFIG: file, OPENAI_API_KEY: "sk-discovery-0123456789", LOG_FORMAT: "json" };

    const nothing = await cli(["status"], env);
    expect(nothing.code).toBe(1);
    expect(nothing.stdout).toContain(`config: ${file} (named by COUNTBOT_CONFIG)\n`);
    expect(nothing.stdout).toContain("no Redis configured");
    expect(nothing.stdout).toContain(`no countbot process answers at http://127.0.0.1:${port}/api/operations (ECONNREFUSED)`);

    // A generated token (no api.token): status reads it from the data directory as start wrote it.
    const start = startService(["start"], { HOME: home, COUNTBOT_DATA_DIR: path.join(root, "data"), ...env });
    const started = await start.waitForLog(/countbot started/, 60_000);
    expect(started).toMatchObject({ config: file, port });
    const running = await cli(["status"], env);
    expect(running.stderr).toBe("");
    expect(running.stdout).toBe(
      [
        `config: ${file} (named by COUNTBOT_CONFIG)`,
        "bus: in-process (no Redis configured: redis.url and REDIS_URL are unset), so asking the API of a running `countbot start`",
        `countbot start at http://127.0.0.1:${port}: ready`,
        "chats: 0 waiting for a worker, 0 being answered",
        "dead letters: 0",
        "subagent tasks: 0 running, 0 pending, 0 failed, 0 completed",
        "",
      ].join("\n"),
    );
    expect(running.code).toBe(0);
  });

  it("onboard -c FILE writes a $schema that resolves from the file's directory", async () => {
    for (const target of [path.join(root, "elsewhere.json"), path.join(root, "deep", "er", "countbot.json"), path.join(elsewhere, "config", "countbot.json")]) {
      const written = await cli(["onboard", "-c", target, "--provider", "openai", "--api-key", "sk-discovery-0123456789", "--model", "gpt-4o-mini", "--telegram-token", "", "--no-test"]);
      expect(written.code, written.stderr).toBe(0);
      const { $schema } = JSON.parse(await readFile(target, "utf8")) as { $schema: string };
      expect(path.resolve(path.dirname(target), $schema), target).toBe(schemaFile);
      expect(existsSync(path.resolve(path.dirname(target), $schema))).toBe(true);
    }
  });
});
