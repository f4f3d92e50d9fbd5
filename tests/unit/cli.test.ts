/** The command line's surface, in process: help that runs nothing, the version, usage mistakes, and the README's list. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { commandNames, main } from "../../src/cli/main.js";

async function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await main(argv, { stdout: (text) => void (stdout += text), stderr: (text) => void (stderr += text) });
  return { code, stdout, stderr };
}

const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
const commandsBlock = /## Commands\n\n```\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
const leaves = commandNames().filter((name) => !commandNames().some((other) => other.startsWith(`${name} `)));

describe("countbot", () => {
  it("prints help for every command and runs none of them", async () => {
    for (const name of commandNames()) {
      const result = await run([...name.split(" "), "--help"]);
      expect(result.code, name).toBe(0);
      expect(result.stdout, name).toContain(`Usage: countbot ${name}`);
      expect(result.stderr, name).toBe("");
    }
  });

  it("answers `countbot help` and `countbot help COMMAND` with the help on stdout and exit 0", async () => {
    const overview = await run(["help"]);
    expect(overview).toMatchObject({ code: 0, stderr: "" });
    expect(overview.stdout).toContain("Usage: countbot [options] [command]");
    const ofChat = await run(["help", "chat"]);
    expect(ofChat).toMatchObject({ code: 0, stderr: "" });
    expect(ofChat.stdout).toContain("Usage: countbot chat");
  });

  it("prints its version", async () => {
    const { version } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
    expect(await run(["--version"])).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
  });

  it("answers a mistake with one line, a suggestion when one is close, and exit 2", async () => {
    expect(await run(["strat"])).toEqual({ code: 2, stdout: "", stderr: "countbot: unknown command 'strat' (did you mean start?)\n" });
    expect(await run(["chat", "--sesion", "x"])).toEqual({ code: 2, stdout: "", stderr: "countbot: unknown option '--sesion' (did you mean --session?)\n" });
    expect(await run(["agent"])).toEqual({ code: 2, stdout: "", stderr: "countbot: required option '-m, --message <text>' not specified\n" });
    expect(await run(["worker", "now"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^countbot: too many arguments for 'worker'/) });
    expect(await run(["tasks", "list", "--limit", "0"])).toMatchObject({ code: 2, stderr: expect.stringContaining("expected a whole number above 0") });
  });

  it("is listed whole in the README's Commands block, and the block names no command it lacks", () => {
    const listed = commandsBlock
      .split("\n")
      .filter((line) => line.startsWith("countbot ") && !line.startsWith("countbot --"))
      .map((line) => /^countbot ((?:[a-z]+(?: |$))+)/.exec(line)?.[1]?.trim() ?? line);
    for (const leaf of leaves) expect(listed.some((name) => name === leaf), `README lists countbot ${leaf}`).toBe(true);
    // `help` is commander's own command.
    for (const name of listed.filter((name) => name !== "help")) expect(commandNames(), `countbot ${name} exists`).toContain(name);
  });
});
