import { PassThrough, Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { CliChannel } from "../../../channels/cli/cli-channel.js";
import { type Harness, startHarness } from "../../support/agent-harness.js";
import { scriptedModel } from "../../support/scripted-model.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function terminal() {
  let text = "";
  const output = Object.assign(
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        text += chunk.toString("utf8");
        callback();
      },
    }),
    { isTTY: false },
  );
  return { output, read: () => text };
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function chat(model: ReturnType<typeof scriptedModel>) {
  harness = await startHarness(model, { channel: "unused" });
  const input = new PassThrough();
  const screen = terminal();
  let clock = 0;
  const channel = new CliChannel({ bus: harness.runtime.bus, input, output: screen.output, chatId: "local", color: false, now: () => clock });
  await channel.start();
  return { channel, input, screen, advance: (ms: number) => (clock += ms) };
}

describe("CliChannel", () => {
  it("streams the reply and shows each tool call as one line", async () => {
    const { input, screen, channel } = await chat(
      scriptedModel([{ text: "Checking.", toolCalls: [{ name: "list_dir", arguments: {} }] }, { text: ["All ", "clear."] }]),
    );
    input.write("look around\n");
    await until(() => screen.read().includes("All clear."), "the reply");
    expect(screen.read()).toContain("bot › Checking.");
    expect(screen.read()).toMatch(/\n {2}↳ list_dir\(\{\}\)\n/);
    expect(screen.read().indexOf("list_dir")).toBeLessThan(screen.read().indexOf("All clear."));
    await channel.exit();
  });

  it("Ctrl-C stops the running turn, and a second Ctrl-C exits", async () => {
    const { input, screen, channel, advance } = await chat(scriptedModel([{ text: "Starting a long job", hang: true }]));
    input.write("do the long job\n");
    await until(() => screen.read().includes("Starting a long job"), "the first words");
    await channel.interrupt();
    await until(() => screen.read().includes("[stopped]"), "the stop");
    let exited = false;
    void channel.done.then(() => (exited = true));
    advance(100);
    input.write("and another long one\n");
    await channel.interrupt();
    advance(100);
    await channel.interrupt();
    await until(() => exited, "the exit");
  });

  it("/stop cancels the turn at once instead of queueing behind it", async () => {
    const { input, screen, channel } = await chat(scriptedModel([{ text: "Working", hang: true }]));
    input.write("work\n");
    await until(() => screen.read().includes("Working"), "the first words");
    input.write("/stop\n");
    await until(() => screen.read().includes("[stopped]"), "the stop");
    await channel.exit();
  });

  it("exits on Ctrl-C when nothing is running", async () => {
    const { channel } = await chat(scriptedModel([]));
    await channel.interrupt();
    await channel.done;
  });
});
