/**
 * Runs `bin/countbot.js` as a child process with a clean environment (no inherited API keys, a
 * temp HOME), collects its output, and kills it by pid if it overstays.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { providerCatalog, providerVariables } from "../../src/config/provider-catalog.js";

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const countbotBin = path.join(projectRoot, "bin", "countbot.js");

// Every catalog provider's variables too: a developer's DEEPSEEK_API_KEY must not reach a test.
const providerVariableNames = providerCatalog.flatMap((entry) => {
  const variables = providerVariables(entry);
  return [...variables.apiKey, variables.baseURL];
});
const inheritedPrefixes = ["OPENAI_", "ANTHROPIC_", "COUNTBOT_", "TELEGRAM_", "DISCORD_", "FEISHU_", "DINGTALK_", "BRAVE_", "REDIS_URL", "LOG_LEVEL", ...providerVariableNames];

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function cleanEnvironment(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !inheritedPrefixes.some((prefix) => name.startsWith(prefix))));
  return { ...base, NO_COLOR: "1", ...extra };
}

export function runCli(args: string[], options: { env: Record<string, string>; input?: string; cwd?: string; timeoutMs?: number }): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [countbotBin, ...args], {
      env: cleanEnvironment(options.env),
      cwd: options.cwd ?? projectRoot,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const timer = setTimeout(() => {
      if (child.pid) process.kill(child.pid, "SIGKILL");
      reject(new Error(`countbot ${args.join(" ")} did not exit in time.\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? "");
  });
}
