/** `countbot --config <file> usage`: the report reads the deployment the named config file describes. */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/run-cli.js";

let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-usage-cli-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("countbot usage", () => {
  it("takes the config file named by --config, not the one it would find", { timeout: 60_000 }, async () => {
    const configFile = path.join(root, "elsewhere", "countbot.json");
    await mkdir(path.dirname(configFile), { recursive: true });
    await writeFile(configFile, JSON.stringify({ budgets: { currency: "EUR" } }));
    const run = await runCli(["--config", configFile, "usage", "--json"], { env: { HOME: root, COUNTBOT_DATA_DIR: path.join(root, "data") }, cwd: root });
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect((JSON.parse(run.stdout) as { currency: string }).currency).toBe("EUR");
  });
});
