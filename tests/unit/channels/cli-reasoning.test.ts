/**
 * The model's reasoning in the terminal chat: with `agent.showReasoning` it shows dimmed, each line
 * behind `┆`, before the reply and apart from it; without, nothing of it shows. Either way the reply
 * is the answer alone.
 */
import { PassThrough, Writable } from "node:stream";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { CliChannel } from "../../../channels/cli/cli-channel.js";
import { createCliRuntime } from "../../../src/cli/cli-runtime.js";
import type { ChannelRuntime } from "../../../src/gateway/channel-runtime.js";
import { type Harness, startHarness } from "../../support/agent-harness.js";
import { scriptedModel } from "../../support/scripted-model.js";

let harness: Harness | undefined;
let gateway: ChannelRuntime | undefined;
afterEach(async () => {
  await gateway?.stop();
  gateway = undefined;
  await harness?.close();
  harness = undefined;
});

const REASONING = "The user wants the files.\nI should list the directory first.";

async function chatWithReasoning(showReasoning: boolean): Promise<string> {
  const model = scriptedModel([
    { reasoning: REASONING, toolCalls: [{ name: "list_dir", arguments: {} }] },
    { reasoning: "Nothing odd there.", text: "All clear." },
  ]);
  harness = await startHarness(model, { channel: "unused", config: { agent: { showReasoning } } });
  let text = "";
  const output = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      text += chunk.toString("utf8");
      callback();
    },
  });
  const input = new PassThrough();
  const channel = new CliChannel({ input, output, chatId: "local", color: true });
  gateway = createCliRuntime(channel, { bus: harness.runtime.bus, store: harness.runtime.store, logger: pino({ level: "silent" }) });
  await gateway.start();
  input.write("what is here?\n");
  const deadline = Date.now() + 5_000;
  while (!(text.includes("All clear.") && channel.pending === 0)) {
    if (Date.now() > deadline) throw new Error(`no reply; the screen shows: ${JSON.stringify(text)}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await channel.exit();
  return text;
}

describe("reasoning in the terminal chat", () => {
  it("shows it dimmed, line by line, before the tool call and the reply it led to, with agent.showReasoning", async () => {
    const screen = await chatWithReasoning(true);
    const dim = (line: string) => `\x1b[2m  ┆ ${line}\x1b[22m`;
    expect(screen).toContain(`${dim("The user wants the files.")}\n${dim("I should list the directory first.")}\n`);
    expect(screen.indexOf(dim("The user wants the files."))).toBeLessThan(screen.indexOf("list_dir({})"));
    expect(screen.indexOf(dim("Nothing odd there."))).toBeGreaterThan(screen.indexOf("list_dir({})"));
    expect(screen.indexOf(dim("Nothing odd there."))).toBeLessThan(screen.indexOf("All clear."));
    // The reply line holds the answer alone.
    expect(screen).toContain("\x1b[1mbot ›\x1b[22m All clear.\n");
    const history = await harness!.runtime.agent.loadSession("cli:local");
    expect(JSON.stringify(history.history)).not.toContain("list the directory");
    expect(JSON.stringify(history.history)).not.toContain("Nothing odd");
  });

  it("shows nothing of it by default", async () => {
    const screen = await chatWithReasoning(false);
    expect(screen).toContain("All clear.");
    expect(screen).not.toContain("┆");
    expect(screen).not.toContain("list the directory");
  });
});
