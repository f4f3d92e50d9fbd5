/**
 * `countbot agent -m` and `countbot chat` as child processes against the fake OpenAI and
 * Anthropic servers, through the real SDKs: the model reads a workspace file with read_file and
 * answers with its text; the session continues on a second call.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeAnthropicServer, startFakeAnthropic } from "../support/fake-anthropic-server.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { runCli } from "../support/run-cli.js";

let root: string;
let dataDir: string;
const closers: Array<() => Promise<void>> = [];

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-e2e-"));
  dataDir = path.join(root, "data");
  await mkdir(path.join(dataDir, "workspace"), { recursive: true });
  await writeFile(path.join(dataDir, "workspace", "hello.txt"), "The password of the day is swordfish.");
});
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  await rm(root, { recursive: true, force: true });
});

function baseEnv(extra: Record<string, string>): Record<string, string> {
  return { HOME: root, COUNTBOT_DATA_DIR: dataDir, ...extra };
}

/** Finds the text of the tool result the agent sent back, in either wire format. */
function toolResultIn(body: Record<string, unknown>): string | undefined {
  const messages = body.messages as Array<Record<string, unknown>>;
  for (const message of messages) {
    if (message.role === "tool") return String(message.content);
    if (Array.isArray(message.content)) {
      for (const block of message.content as Array<Record<string, unknown>>) {
        if (block.type === "tool_result") return typeof block.content === "string" ? block.content : JSON.stringify(block.content);
      }
    }
  }
  return undefined;
}

function lastUserText(body: Record<string, unknown>): string {
  const messages = body.messages as Array<Record<string, unknown>>;
  const last = [...messages].reverse().find((message) => message.role === "user");
  return typeof last?.content === "string" ? last.content : JSON.stringify(last?.content);
}

describe("countbot agent -m against the fake OpenAI server", () => {
  let server: FakeOpenAIServer;

  beforeEach(async () => {
    server = await startFakeOpenAI({
      script: (body) => {
        const result = toolResultIn(body);
        if (lastUserText(body).includes("what did I ask")) return { text: "You asked about hello.txt." };
        if (result === undefined) return { toolCalls: [{ name: "read_file", arguments: JSON.stringify({ path: "hello.txt" }) }] };
        return { text: ["The file says: ", result] };
      },
    });
    closers.push(server.close);
  });

  it("reads a workspace file through read_file and answers with its text, then continues the session", async () => {
    const env = baseEnv({ OPENAI_API_KEY: "sk-test-0123456789", OPENAI_BASE_URL: server.url, COUNTBOT_MODEL: "openai/gpt-test" });
    const first = await runCli(["agent", "-m", "What does hello.txt say?", "-s", "e2e"], { env });
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(first.stdout).toBe("The file says: The password of the day is swordfish.\n");
    expect(server.requests).toHaveLength(2);
    expect(server.requests[0]!.headers.authorization).toBe("Bearer sk-test-0123456789");
    expect((server.requests[0]!.body.tools as unknown[]).length).toBeGreaterThan(0);

    const second = await runCli(["agent", "-m", "what did I ask before?", "-s", "e2e"], { env });
    expect(second.code).toBe(0);
    expect(second.stdout).toBe("You asked about hello.txt.\n");
    const history = (server.requests[2]!.body.messages as Array<{ role: string; content: unknown }>).map((message) => message.role);
    expect(history).toEqual(["system", "user", "assistant", "user"]);
  });

  it("writes the model's reasoning to stderr with agent.showReasoning, and only the answer to stdout", async () => {
    const reasoningServer = await startFakeOpenAI({ script: [{ reasoning: ["Weighing ", "the question."], text: "Forty-two." }, { text: "Again." }] });
    closers.push(reasoningServer.close);
    const configFile = path.join(root, "countbot.json");
    await writeFile(configFile, JSON.stringify({ agent: { showReasoning: true } }));
    const env = baseEnv({ OPENAI_API_KEY: "sk-test-0123456789", OPENAI_BASE_URL: reasoningServer.url, COUNTBOT_MODEL: "openai/gpt-test", COUNTBOT_CONFIG: configFile });
    const run = await runCli(["agent", "-m", "the answer?", "-s", "reasoning"], { env });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("Forty-two.\n");
    expect(run.stderr).toBe("Weighing the question.\n");
    const again = await runCli(["agent", "-m", "once more", "-s", "reasoning"], { env });
    expect(again.stdout).toBe("Again.\n");
    expect(reasoningServer.requests[1]!.raw).not.toContain("Weighing");
  });

  it("streams the same conversation through `countbot chat` with piped input", async () => {
    const env = baseEnv({ OPENAI_API_KEY: "sk-test-0123456789", OPENAI_BASE_URL: server.url, COUNTBOT_MODEL: "openai/gpt-test" });
    const run = await runCli(["chat", "-s", "piped"], { env, input: "What does hello.txt say?\n" });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("read_file(");
    expect(run.stdout).toContain("The file says: The password of the day is swordfish.");
  });
});

describe("countbot agent -m against the fake Anthropic server", () => {
  let server: FakeAnthropicServer;

  beforeEach(async () => {
    server = await startFakeAnthropic({
      script: (body) => {
        const result = toolResultIn(body);
        if (lastUserText(body).includes("what did I ask")) return { text: "You asked about hello.txt." };
        if (result === undefined) {
          return { thinking: { text: "I should read it.", signature: "sig-1" }, toolCalls: [{ name: "read_file", arguments: JSON.stringify({ path: "hello.txt" }) }] };
        }
        return { text: ["The file says: ", result] };
      },
    });
    closers.push(server.close);
  });

  it("reads a workspace file through read_file and answers with its text, then continues the session", async () => {
    const env = baseEnv({ ANTHROPIC_API_KEY: "sk-ant-test-0123456789", ANTHROPIC_BASE_URL: server.url, COUNTBOT_MODEL: "anthropic/claude-test" });
    const first = await runCli(["agent", "-m", "What does hello.txt say?", "-s", "e2e"], { env });
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(first.stdout).toBe("The file says: The password of the day is swordfish.\n");
    // SDK 1.x sends the key as a bearer token; older ones used x-api-key.
    const headers = server.requests[0]!.headers;
    expect([headers["x-api-key"], headers.authorization]).toContainEqual(expect.stringContaining("sk-ant-test-0123456789"));
    // The thinking block went back with its signature on the tool-result request.
    expect(JSON.stringify(server.requests[1]!.body.messages)).toContain("sig-1");

    const second = await runCli(["agent", "-m", "what did I ask before?", "-s", "e2e"], { env });
    expect(second.code).toBe(0);
    expect(second.stdout).toBe("You asked about hello.txt.\n");
    const roles = (server.requests[2]!.body.messages as Array<{ role: string }>).map((message) => message.role);
    expect(roles).toEqual(["user", "assistant", "user"]);
  });
});

describe("countbot agent -m with a catalog provider", () => {
  it("answers with only COUNTBOT_MODEL and the provider's variables set, no config file", async () => {
    const server = await startFakeOpenAI({ script: () => ({ text: "Hello from DeepSeek." }) });
    closers.push(server.close);
    const run = await runCli(["agent", "-m", "hi"], {
      env: baseEnv({ COUNTBOT_MODEL: "deepseek/deepseek-chat", DEEPSEEK_API_KEY: "sk-deepseek-0123456789", DEEPSEEK_BASE_URL: server.url }),
    });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe("Hello from DeepSeek.");
    expect(server.requests[0]?.body.model).toBe("deepseek-chat");
    expect(server.requests[0]?.headers.authorization).toBe("Bearer sk-deepseek-0123456789");
  });

  it("names the unset ${VAR} a config's key was to come from, and the variable to set", async () => {
    const file = path.join(root, "deepseek.json");
    await writeFile(file, JSON.stringify({ agent: { model: "deepseek/deepseek-chat" }, providers: { deepseek: { apiKey: "${DEEPSEEK_KEY}" } } }));
    const run = await runCli(["agent", "-m", "hi"], { env: baseEnv({ COUNTBOT_CONFIG: file }) });
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toContain("providers.deepseek.apiKey comes from ${DEEPSEEK_KEY}, which is not set. Set DEEPSEEK_API_KEY or providers.deepseek.apiKey");
  });
});

describe("countbot agent -m failures", () => {
  it("says which variable to set when no provider is configured", async () => {
    const run = await runCli(["agent", "-m", "hi"], { env: baseEnv({}) });
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toContain("OPENAI_API_KEY");
  });

  it("names the config field of a bad value", async () => {
    const file = path.join(root, "bad.json");
    await writeFile(file, JSON.stringify({ agent: { maxIterations: "lots" } }));
    const run = await runCli(["agent", "-m", "hi"], { env: baseEnv({ COUNTBOT_CONFIG: file, OPENAI_API_KEY: "sk-x" }) });
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toContain("agent.maxIterations");
  });

  it("exits non-zero with one line when the model keeps failing", async () => {
    const server = await startFakeOpenAI({ script: () => ({ error: { status: 500, message: "the fake upstream is down" } }) });
    closers.push(server.close);
    const file = path.join(root, "config.json");
    await writeFile(file, JSON.stringify({ agent: { providerRetries: 0 } }));
    const run = await runCli(["agent", "-m", "hi"], {
      env: baseEnv({ COUNTBOT_CONFIG: file, OPENAI_API_KEY: "sk-test-0123456789", OPENAI_BASE_URL: server.url }),
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toContain("the fake upstream is down");
    expect(run.stderr).not.toContain("sk-test-0123456789");
  });

  it("fails with exactly one line even when the provider retries, the log going to the data directory unless --verbose", async () => {
    const server = await startFakeOpenAI({ script: () => ({ error: { status: 503, message: "overloaded for a moment" } }) });
    closers.push(server.close);
    const file = path.join(root, "retrying.json");
    const dataDir = path.join(root, "retrying-data");
    await writeFile(file, JSON.stringify({ agent: { providerRetries: 2 } }));
    const env = baseEnv({ COUNTBOT_CONFIG: file, COUNTBOT_DATA_DIR: dataDir, OPENAI_API_KEY: "sk-test-0123456789", OPENAI_BASE_URL: server.url });
    const quiet = await runCli(["agent", "-m", "hi"], { env });
    expect(quiet.code).toBe(1);
    expect(quiet.stderr.trim().split("\n")).toEqual([expect.stringMatching(/^countbot: the turn failed: .*overloaded for a moment/)]);
    const log = await readFile(path.join(dataDir, "logs", "countbot.log"), "utf8");
    expect(log).toMatch(/retry/i);
    expect(log).not.toContain("sk-test-0123456789");

    const verbose = await runCli(["agent", "-m", "hi", "--verbose"], { env: { ...env, LOG_FORMAT: "json" } });
    expect(verbose.code).toBe(1);
    const lines = verbose.stderr.trim().split("\n");
    expect(lines.length).toBeGreaterThan(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: expect.any(Number), msg: expect.any(String) });
  });

  it("asks for -m when it is missing", async () => {
    const run = await runCli(["agent"], { env: baseEnv({}) });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("-m");
  });
});
