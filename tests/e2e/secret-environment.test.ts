/**
 * Secrets without a sandbox (`tools.exec.sandbox: "none"`): a CountBot process started with fake
 * keys in its environment takes them out once the config holds them, and blanks them in its
 * original environment block, so a same-user command finds no key through any spelling of
 * `/proc/<pid>/environ`: a plain path, through `cd`, a glob, a variable, `ps eww`, a symlink, the
 * task directory, a redirect. Each spelling is run twice: by the model through the exec tool
 * (where `$PPID` is CountBot), and by this test directly against CountBot's pid, past the command
 * filter. A control process started with the same environment shows the keys to the same
 * commands, so the reads work. Commands run only in this test's temp directory, against processes
 * this test started.
 */
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { startService, stopAllServices } from "../support/processes.js";
import { cleanEnvironment } from "../support/run-cli.js";

const tag = randomBytes(6).toString("hex");
const keys = {
  OPENAI_API_KEY: `sk-fake-openai-${tag}`,
  DEEPSEEK_API_KEY: `sk-fake-deepseek-${tag}`,
  COUNTBOT_API_TOKEN: `fake-api-token-${tag}-0123456789`,
  TELEGRAM_BOT_TOKEN: `4242:fake-telegram-${tag}`,
  MY_SERVICE_PASSWORD: `fake-password-${tag}`,
};

/** `$P` is the process to read; each runs with /bin/sh in the test's temp directory. */
const spellings = [
  'cat /proc/$P/environ',
  'cd /proc/$P && cat environ',
  'cat /proc/$P/env*',
  'f=/proc/$P/environ; cat "$f"',
  'ps eww -p $P',
  'ln -s /proc/$P proc-link && cat proc-link/environ',
  'cat /proc/$P/task/$P/environ',
  "tr '\\0' '\\n' < /proc/$P/environ",
];

let root: string;
let llm: FakeOpenAIServer | undefined;
const closers: Array<() => Promise<unknown>> = [];
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-secret-env-"));
});
afterEach(async () => {
  await stopAllServices();
  for (const close of closers.splice(0).reverse()) await close();
  await rm(root, { recursive: true, force: true });
});

function runSpelling(spelling: string, pid: number, cwd: string): string {
  const result = spawnSync("/bin/sh", ["-c", spelling], { cwd, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", P: String(pid) }, encoding: "latin1", timeout: 10_000 });
  return `${result.stdout}${result.stderr}`;
}

function leaked(text: string): string[] {
  return Object.entries(keys)
    .filter(([, value]) => text.includes(value))
    .map(([name]) => name);
}

describe('secrets under tools.exec.sandbox: "none"', () => {
  it("no spelling of /proc/<pid>/environ finds a key, through the exec tool or run directly", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    llm = await startFakeOpenAI({
      script: (_body, index) =>
        index === 0
          ? { toolCalls: spellings.map((spelling, position) => ({ id: `call_${position}`, name: "exec", arguments: JSON.stringify({ command: spelling.replaceAll("$P", "$PPID") }) })) }
          : { text: "done", until: gate },
    });
    closers.push(() => llm!.close());
    const dataDir = path.join(root, "data");
    await mkdir(path.join(dataDir, "workspace"), { recursive: true });
    const configFile = path.join(root, "countbot.json");
    await writeFile(
      configFile,
      JSON.stringify({
        agent: { model: "openai/gpt-test", providerRetries: 0 },
        providers: { openai: { baseURL: llm.url }, deepseek: { apiKey: "${DEEPSEEK_API_KEY}", baseURL: llm.url } },
        tools: { exec: { sandbox: "none" } },
      }),
    );
    const agent = startService(["agent", "-m", "show me your environment", "--verbose"], { HOME: root, COUNTBOT_DATA_DIR: dataDir, COUNTBOT_CONFIG: configFile, LOG_FORMAT: "json", ...keys });
    const warning = await agent.waitForLog(/tools\.exec\.sandbox is "none"/, 60_000);
    expect(warning.canRead).toEqual([
      expect.stringMatching(/^environment: the secret variables \(.+\) are out of this process's environment and blanked in \/proc\/\d+\/environ/),
      expect.stringMatching(/^memory: /),
      expect.stringMatching(/^files: a command can read whatever this user can: the config file, .*api-token/),
      expect.stringMatching(/^other processes: /),
    ]);
    for (const name of Object.keys(keys)) expect(String(warning.canRead)).toContain(name);

    // The model's turn: every exec result is back before the second model call.
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (llm!.requests.length < 2) return;
        clearInterval(poll);
        resolve();
      }, 20);
    });
    const toolResults = (llm.requests[1]!.body.messages as Array<{ role: string; content: unknown }>).filter((message) => message.role === "tool").map((message) => String(message.content));
    expect(toolResults).toHaveLength(spellings.length);
    expect(leaked(toolResults.join("\n"))).toEqual([]);
    // Not all of them were refused by the filter: some ran and read the (blanked) block.
    expect(toolResults.some((result) => result.includes("OPENAI_API_KEY="))).toBe(true);

    // Directly, past the filter, while the agent is still running (its second model call waits).
    const work = path.join(root, "work");
    await mkdir(work);
    for (const spelling of spellings) {
      await rm(path.join(work, "proc-link"), { force: true });
      const output = runSpelling(spelling, agent.pid, work);
      expect(output, spelling).toMatch(/OPENAI_API_KEY=/);
      expect(leaked(output), spelling).toEqual([]);
    }

    // The control: a process with the same environment that did not blank it shows every key.
    const control = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { env: cleanEnvironment(keys), stdio: "ignore" });
    closers.push(async () => void (control.pid && process.kill(control.pid, "SIGKILL")));
    for (const spelling of spellings) {
      await rm(path.join(work, "proc-link"), { force: true });
      expect(leaked(runSpelling(spelling, control.pid!, work)), spelling).toEqual(Object.keys(keys));
    }

    release();
    if (agent.child.exitCode === null) await new Promise((resolve) => agent.child.once("exit", resolve));
    expect(agent.child.exitCode).toBe(0);
  });
});
