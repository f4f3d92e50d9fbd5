/**
 * `countbot onboard` as a newcomer runs it: answers piped in (or flags), the model tested with one
 * call, the file written 0600 with no secret echoed, an existing file kept unless --force, nothing
 * written when the model does not answer; the provider catalog offered (a local server asked for its
 * URL and no key, and sent none).
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { cleanEnvironment, countbotBin, runCli } from "../support/run-cli.js";

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

/** tmux on its own socket: a real terminal for the command in its one pane. */
function tmux(socket: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("tmux", ["-L", socket, ...args], { encoding: "utf8" }, (error, stdout, stderr) => (error ? reject(new Error(`tmux ${args[0]}: ${stderr || error.message}`)) : resolve(stdout)));
  });
}

/** The exit status the pane's shell wrote once the command ended. */
async function exitStatus(file: string): Promise<string> {
  for (let attempt = 0; attempt < 600; attempt++) {
    const status = await readFile(file, "utf8").catch(() => "");
    if (status.trim() !== "") return status.trim();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("the command on the terminal did not exit");
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, "'\\''")}'`;
}

async function screenShows(socket: string, text: string): Promise<string> {
  for (let attempt = 0; attempt < 300; attempt++) {
    const screen = await tmux(socket, "capture-pane", "-p", "-S", "-100", "-t", "onboard");
    if (screen.includes(text)) return screen;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the terminal never showed "${text}":\n${await tmux(socket, "capture-pane", "-p", "-S", "-100", "-t", "onboard")}`);
}

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

  it("on a real terminal, hides the typed key and token and still reads them", async () => {
    const file = path.join(root, "tty", "countbot.json");
    const socket = `countbot-onboard-${process.pid}-${Date.now()}`;
    const variables = Object.entries(cleanEnvironment(env())).map(([name, value]) => `${name}=${value ?? ""}`);
    let serverPid: number | undefined;
    try {
      // The shell in the pane writes the command's exit status to a file (tmux's own pane status can stay empty).
      const statusFile = path.join(root, "tty-exit-status");
      const command = ["env", "-i", ...variables, process.execPath, countbotBin, "onboard", "-c", file].map(shellQuote).join(" ");
      await tmux(socket, "new-session", "-d", "-s", "onboard", "-x", "200", "-y", "50", "sh", "-c", `${command}; echo $? > ${shellQuote(statusFile)}`);
      serverPid = Number((await tmux(socket, "display-message", "-p", "-t", "onboard", "#{pid}")).trim());
      await tmux(socket, "set-option", "-t", "onboard", "remain-on-exit", "on");
      const type = async (prompt: string, answer: string) => {
        await screenShows(socket, prompt);
        await tmux(socket, "send-keys", "-t", "onboard", "-l", answer);
        await tmux(socket, "send-keys", "-t", "onboard", "Enter");
      };
      await type("Model provider", "mycloud");
      await type("Base URL of the mycloud API", llm.url);
      await type("API key for mycloud (hidden)", KEY);
      await type("Model [", "tty-model");
      await type("Telegram bot token (hidden", "777:tty-telegram-secret");
      await type("Telegram user ids allowed", "42");
      const screen = await screenShows(socket, "it answers");
      expect(screen).not.toContain(KEY);
      expect(screen).not.toContain("tty-telegram-secret");
      expect(screen).toContain("tty-model"); // what is not secret is echoed as typed
      expect(await exitStatus(statusFile)).toBe("0");
      expect(JSON.parse(await readFile(file, "utf8"))).toMatchObject({
        agent: { model: "mycloud/tty-model" },
        providers: { mycloud: { apiKey: KEY } },
        channels: { telegram: { token: "777:tty-telegram-secret", allowFrom: ["42"] } },
      });
    } finally {
      await tmux(socket, "kill-server").catch(() => undefined);
      if (serverPid) {
        try {
          process.kill(serverPid, "SIGKILL");
        } catch {
          // gone already
        }
      }
    }
  });

  it("offers the catalog: a provider of it needs only its key, its URL defaulting to the catalog's", async () => {
    const file = path.join(root, "deepseek", "countbot.json");
    // The URL answered (the fake), the key typed, the model left at the catalog's default, no Telegram.
    const answers = ["deepseek", llm.url, KEY, "", ""].join("\n");
    const result = await runCli(["onboard", "-c", file], { env: env(), input: `${answers}\n`, timeoutMs: 60_000 });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Model provider (openai, anthropic, deepseek, qwen, moonshot, zhipu, minimax, siliconflow, openrouter, groq, together, mistral, xai, gemini, azure-openai, ollama, vllm, lmstudio;");
    expect(result.stdout).toContain("Base URL of the DeepSeek API (empty: https://api.deepseek.com/v1): ");
    expect(result.stdout).toContain("Model [deepseek-chat]: ");
    expect(result.stdout).toContain("Testing deepseek/deepseek-chat with one request... it answers");
    const written = JSON.parse(await readFile(file, "utf8"));
    expect(written.agent).toEqual({ model: "deepseek/deepseek-chat" });
    // No `type`: the catalog knows it.
    expect(written.providers).toEqual({ deepseek: { apiKey: KEY, baseURL: llm.url } });
    const request = llm.requests.at(-1)!;
    expect(request.body.model).toBe("deepseek-chat");
    expect(request.headers.authorization).toBe(`Bearer ${KEY}`);

    const keyless = await runCli(["onboard", "-c", path.join(root, "azure.json"), "--provider", "azure-openai", "--api-key", KEY, "--no-test"], { env: env(), timeoutMs: 60_000 });
    expect(keyless.code).toBe(2);
    expect(keyless.stderr).toContain("--base-url: Azure OpenAI (v1 API; the model is the deployment name) has no default URL; give yours, e.g. https://<resource>.openai.azure.com/openai/v1");
  });

  it("on a real terminal, a local server is asked for its URL and no key, and gets none", async () => {
    const file = path.join(root, "ollama", "countbot.json");
    const socket = `countbot-onboard-local-${process.pid}-${Date.now()}`;
    const variables = Object.entries(cleanEnvironment(env())).map(([name, value]) => `${name}=${value ?? ""}`);
    let serverPid: number | undefined;
    try {
      const statusFile = path.join(root, "local-exit-status");
      const command = ["env", "-i", ...variables, process.execPath, countbotBin, "onboard", "-c", file].map(shellQuote).join(" ");
      await tmux(socket, "new-session", "-d", "-s", "onboard", "-x", "200", "-y", "50", "sh", "-c", `${command}; echo $? > ${shellQuote(statusFile)}`);
      serverPid = Number((await tmux(socket, "display-message", "-p", "-t", "onboard", "#{pid}")).trim());
      await tmux(socket, "set-option", "-t", "onboard", "remain-on-exit", "on");
      const type = async (prompt: string, answer: string) => {
        await screenShows(socket, prompt);
        await tmux(socket, "send-keys", "-t", "onboard", "-l", answer);
        await tmux(socket, "send-keys", "-t", "onboard", "Enter");
      };
      const before = llm.requests.length;
      await type("Model provider", "ollama");
      await type("URL of your Ollama (local) server [http://localhost:11434/v1]", llm.url);
      await type("Model [llama3.2]", "");
      await type("Telegram bot token (hidden", "");
      const screen = await screenShows(socket, "it answers");
      expect(screen).not.toContain("API key");
      expect(await exitStatus(statusFile)).toBe("0");
      expect(JSON.parse(await readFile(file, "utf8"))).toMatchObject({ agent: { model: "ollama/llama3.2" }, providers: { ollama: { baseURL: llm.url } } });
      expect(JSON.parse(await readFile(file, "utf8")).providers.ollama.apiKey).toBeUndefined();
      expect(llm.requests).toHaveLength(before + 1);
      expect(llm.requests.at(-1)!.headers.authorization).toBeUndefined();
    } finally {
      await tmux(socket, "kill-server").catch(() => undefined);
      if (serverPid) {
        try {
          process.kill(serverPid, "SIGKILL");
        } catch {
          // gone already
        }
      }
    }
  });

  it("names a bad flag's field", async () => {
    await writeFile(path.join(root, "placeholder"), "");
    const result = await runCli(["onboard", "-c", path.join(root, "bad.json"), "--provider", "my provider", "--api-key", KEY, "--no-test"], { env: env(), timeoutMs: 60_000 });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--provider: expected a name");
  });
});
