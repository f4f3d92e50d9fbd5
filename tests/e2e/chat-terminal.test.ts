/**
 * `countbot chat` on a real terminal (tmux), against a fake OpenAI server: the banner names the
 * config file and the exec sandbox; "thinking… Ns" shows while the model has not answered; the reply
 * (bold, a list, a code block) shows rendered, no literal `**`; one Ctrl-C at the idle prompt only
 * says how to leave (the chat goes on), two exit.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { cleanEnvironment } from "../support/run-cli.js";
import { type TerminalSession, startTerminal } from "../support/tmux.js";

let root: string;
let llm: FakeOpenAIServer;
let terminal: TerminalSession | undefined;
let release!: () => void;
const released = new Promise<void>((resolve) => (release = resolve));

const REPLY = ["Here is **the plan**:\n\n", "- first **step**\n", "- second `step`\n\n", "```sh\nnpm test\n```\n\n", "Done, *really*."];

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-chat-terminal-"));
  // The first answer waits until the test has seen the indicator; the next come at once.
  llm = await startFakeOpenAI({ script: (_body, index) => (index === 0 ? { until: released, text: REPLY } : { text: "Still **here**." }) });
});
afterAll(async () => {
  await terminal?.close();
  await llm?.close();
  await rm(root, { recursive: true, force: true });
});

describe("countbot chat on a terminal", () => {
  it("shows the indicator while the model works, renders the reply's Markdown, and needs Ctrl-C twice to exit", async () => {
    const configFile = path.join(root, "countbot.json");
    await writeFile(configFile, JSON.stringify({ agent: { model: "openai/gpt-4o-mini" } }));
    // A user's terminal: no CI variable (a spinner does not animate in CI logs).
    const { CI: _ci, ...environment } = cleanEnvironment({
      HOME: root,
      TERM: "screen",
      COUNTBOT_CONFIG: configFile,
      COUNTBOT_DATA_DIR: path.join(root, "data"),
      OPENAI_API_KEY: "sk-chat-terminal-0123456789",
      OPENAI_BASE_URL: llm.url,
    });
    terminal = await startTerminal(["chat"], environment as Record<string, string>, root);

    const banner = await terminal.waitFor("Type a message.", 60_000);
    expect(banner).toContain(`config: ${configFile} (named by COUNTBOT_CONFIG)`);
    expect(banner).toMatch(/^sandbox: exec /m);

    await terminal.type("make a plan");
    await terminal.keys("Enter");
    expect(await terminal.waitFor(/thinking… \d+s/)).toMatch(/thinking… \d+s {2}\(Ctrl-C stops it\)/);
    release();

    const reply = await terminal.waitFor("Done, really.");
    expect(reply).not.toContain("**");
    expect(reply).not.toContain("`");
    expect(reply).toMatch(/^bot › Here is the plan:$/m);
    expect(reply).toMatch(/^ {2}\* first step$/m);
    expect(reply).toMatch(/^ {2}\* second step$/m);
    expect(reply).toMatch(/^ {2}npm test$/m);
    // The indicator gave way to the reply: it is not left on the screen.
    await terminal.waitFor(/Done, really\.\nyou ›/);
    expect(await terminal.screen()).not.toContain("thinking…");

    // One Ctrl-C at the idle prompt: a hint, and the chat goes on.
    await terminal.keys("C-c");
    await terminal.waitFor("(Press Ctrl-C again to exit, or type /exit.)");
    await terminal.type("still there?");
    await terminal.keys("Enter");
    await terminal.waitFor(/^bot › Still here\.$/m);
    expect(await terminal.running()).toBe(true);

    // Twice (the line sent in between reset the count): it exits, cleanly.
    await terminal.keys("C-c");
    await terminal.waitFor(/\(Press Ctrl-C again to exit, or type \/exit\.\)[\s\S]*\(Press Ctrl-C again to exit, or type \/exit\.\)/);
    await terminal.keys("C-c");
    expect(await terminal.exitStatus()).toBe("0");
  });
});
