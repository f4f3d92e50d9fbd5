/**
 * `countbot onboard` as a newcomer runs it: answers piped in (or flags), the model tested with one
 * call, the file written 0600 with no secret echoed, an existing file kept unless --force, nothing
 * written when the model does not answer.
 */
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { runCli } from "../support/run-cli.js";

let root: string;
let llm: FakeOpenAIServer;
let refusing: FakeOpenAIServer;
const KEY = "sk-onboard-secret-0123456789";

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-onboard-"));
  llm = await startFakeOpenAI({ script: () => ({ text: "OK" }) });
  refusing = await startFakeOpenAI({ script: () => ({ error: { status: 401, message: "invalid api key" } }) });
});
afterAll(async () => {
  await llm.close();
  await refusing.close();
  await rm(root, { recursive: true, force: true });
});

const env = () => ({ HOME: root, COUNTBOT_DATA_DIR: path.join(root, "data") });

describe("countbot onboard", () => {
  it("asks for what is missing, tests the model, writes the file 0600 and echoes no secret", async () => {
    const file = path.join(root, "asked", "countbot.json");
    const answers = ["mycloud", llm.url, KEY, "fast-model", "123:telegram-secret", "42, 43"].join("\n");
    const result = await runCli(["onboard", "-c", file], { env: env(), input: `${answers}\n`, timeoutMs: 60_000 });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("it answers");
    expect(result.stdout).not.toContain(KEY);
    expect(result.stdout).not.toContain("telegram-secret");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, "utf8"))).toMatchObject({
      agent: { model: "mycloud/fast-model" },
      providers: { mycloud: { type: "openai", apiKey: KEY, baseURL: llm.url } },
      channels: { telegram: { enabled: true, token: "123:telegram-secret", allowFrom: ["42", "43"] } },
    });
    const model = llm.requests.at(-1)!.body as { model: string };
    expect(model.model).toBe("fast-model");

    const again = await runCli(["onboard", "-c", file, "--provider", "openai", "--api-key", KEY, "--no-test"], { env: env(), timeoutMs: 60_000 });
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/exists already: edit it, or run `countbot onboard --force`/);
    const forced = await runCli(["onboard", "-c", file, "--provider", "openai", "--api-key", KEY, "--model", "gpt-4o-mini", "--base-url", llm.url, "--telegram-token", "", "--force"], { env: env(), timeoutMs: 60_000 });
    expect(forced.code).toBe(0);
    expect(JSON.parse(await readFile(file, "utf8"))).toMatchObject({ agent: { model: "openai/gpt-4o-mini" } });
  });

  it("writes nothing when the model does not answer", async () => {
    const file = path.join(root, "refused.json");
    const result = await runCli(["onboard", "-c", file, "--provider", "openai", "--base-url", refusing.url, "--api-key", KEY, "--model", "gpt-4o-mini", "--telegram-token", ""], { env: env(), timeoutMs: 60_000 });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^countbot: the model did not answer, nothing was written: .*invalid api key/);
    expect(result.stderr + result.stdout).not.toContain(KEY);
    await expect(stat(file)).rejects.toThrow();
  });

  it("names a bad flag's field", async () => {
    await writeFile(path.join(root, "placeholder"), "");
    const result = await runCli(["onboard", "-c", path.join(root, "bad.json"), "--provider", "my provider", "--api-key", KEY, "--no-test"], { env: env(), timeoutMs: 60_000 });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--provider: expected a name");
  });
});
