import { PassThrough, Writable } from "node:stream";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { CliChannel } from "../../../channels/cli/cli-channel.js";
import type { ReplyIndicator } from "../../../channels/cli/reply-indicator.js";
import { createTerminalMarkdown } from "../../../channels/cli/terminal-markdown.js";
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

/** The CLI adapter on the shared channel runtime, over an embedded agent playing `model`. */
async function chat(model: ReturnType<typeof scriptedModel>, config: Record<string, unknown> = {}, options: Partial<ConstructorParameters<typeof CliChannel>[0]> = {}) {
  harness = await startHarness(model, { channel: "unused", config });
  const input = new PassThrough();
  const screen = terminal();
  let clock = 0;
  const channel = new CliChannel({ input, output: screen.output, chatId: "local", color: false, now: () => clock, ...options });
  gateway = createCliRuntime(channel, { bus: harness.runtime.bus, store: harness.runtime.store, logger: pino({ level: "silent" }) });
  await gateway.start();
  let exited = false;
  void channel.done.then(() => (exited = true));
  return { channel, input, screen, advance: (ms: number) => (clock += ms), exited: () => exited };
}

describe("CliChannel on the channel runtime", () => {
  it("streams the reply and shows each tool call as one dim line before the text that follows it", async () => {
    const { input, screen, channel } = await chat(
      scriptedModel([{ text: "Checking.", toolCalls: [{ name: "list_dir", arguments: {} }] }, { text: ["All ", "clear."] }]),
    );
    input.write("look around\n");
    // The draft shows the words first; the final ends the line and the turn.
    await until(() => screen.read().includes("All clear.\n") && channel.pending === 0, "the reply");
    expect(screen.read()).toBe("bot › Checking.\n  ↳ list_dir({})\nAll clear.\n");
    expect(channel.pending).toBe(0);
    await channel.exit();
  });

  it("dims tool lines when colour is on", async () => {
    harness = await startHarness(scriptedModel([{ toolCalls: [{ name: "list_dir", arguments: {} }] }, { text: "Done." }]), { channel: "unused" });
    const input = new PassThrough();
    const screen = terminal();
    const channel = new CliChannel({ input, output: screen.output, chatId: "local", color: true });
    gateway = createCliRuntime(channel, { bus: harness.runtime.bus, store: harness.runtime.store, logger: pino({ level: "silent" }) });
    await gateway.start();
    input.write("go\n");
    await until(() => screen.read().includes("Done."), "the reply");
    expect(screen.read()).toContain("\x1b[2m  ↳ list_dir({})\x1b[22m\n");
    await channel.exit();
  });

  it("Ctrl-C stops the running turn, and a second Ctrl-C exits", async () => {
    const { input, screen, channel, advance, exited } = await chat(scriptedModel([{ text: "Starting a long job", hang: true }]));
    input.write("do the long job\n");
    await until(() => screen.read().includes("Starting a long job"), "the first words");
    await channel.interrupt();
    expect(screen.read()).toContain("(Stopping. Press Ctrl-C again to exit.)");
    await until(() => screen.read().includes("[stopped]"), "the stop");
    expect(exited()).toBe(false);
    advance(100);
    await channel.interrupt();
    await until(exited, "the exit");
  });

  it("a second Ctrl-C after the window stops again instead of exiting", async () => {
    const { input, screen, channel, advance, exited } = await chat(
      scriptedModel([
        { text: "One", hang: true },
        { text: "Two", hang: true },
      ]),
    );
    input.write("first\n");
    await until(() => screen.read().includes("One"), "the first reply");
    await channel.interrupt();
    await until(() => screen.read().includes("One\n(Stopping. Press Ctrl-C again to exit.)\n[stopped]\n"), "the first stop");
    advance(5_000);
    input.write("second\n");
    await until(() => screen.read().includes("Two"), "the second reply");
    await channel.interrupt();
    await until(() => (screen.read().match(/\[stopped\]/g) ?? []).length === 2, "the second stop");
    expect(exited()).toBe(false);
    await channel.exit();
  });

  it("/stop cancels the turn at once instead of queueing behind it", async () => {
    const { input, screen, channel } = await chat(scriptedModel([{ text: "Working", hang: true }]));
    input.write("work\n");
    await until(() => screen.read().includes("Working"), "the first words");
    input.write("/stop\n");
    await until(() => screen.read().includes("[stopped]"), "the stop");
    expect(screen.read()).toContain("(Stopping.)");
    expect(channel.pending).toBe(0);
    await channel.exit();
  });

  it("at an idle prompt, one Ctrl-C says how to leave and a second within 2 s exits", async () => {
    const { channel, screen, advance, exited } = await chat(scriptedModel([]));
    await channel.interrupt();
    expect(screen.read()).toBe("(Press Ctrl-C again to exit, or type /exit.)\n");
    advance(2_500);
    await channel.interrupt();
    expect(exited()).toBe(false);
    advance(100);
    await channel.interrupt();
    await until(exited, "the exit");
  });

  it("does not count two Ctrl-Cs with a line sent between them as one double press", async () => {
    const { channel, input, screen, advance, exited } = await chat(scriptedModel([{ text: "Hi." }]));
    await channel.interrupt();
    input.write("hello\n");
    await until(() => screen.read().includes("Hi.\n") && channel.pending === 0, "the reply");
    advance(100);
    await channel.interrupt();
    expect(exited()).toBe(false);
    expect(screen.read().match(/Press Ctrl-C again to exit, or type \/exit/g)).toHaveLength(2);
    await channel.exit();
  });

  it("answers /help at the gateway and keeps /new and /status going through the agent", async () => {
    const { input, screen, channel } = await chat(scriptedModel([{ text: "Hi." }]));
    input.write("/help\n");
    await until(() => screen.read().includes("/exit: leave"), "the help");
    expect(screen.read()).toContain("/stop: stop the reply");
    input.write("hello\n");
    await until(() => screen.read().includes("bot › Hi."), "the reply");
    input.write("/status\n");
    await until(() => channel.pending === 0 && screen.read().split("bot › ").length === 3, "the status");
    input.write("/new\n");
    await until(() => screen.read().includes("Started a new conversation."), "the reset");
    await channel.exit();
  });

  it("piped input: at the end of input, waits until every line was answered, a burst coalesced into one turn included, then exits", async () => {
    const model = scriptedModel([{ text: "Both read." }, { text: "Third." }]);
    const { input, screen, channel, exited } = await chat(model, { agent: { debounceMs: 100 } });
    input.write("one\ntwo\n");
    await until(() => screen.read().includes("Both read."), "the first reply");
    input.end("three\n");
    await until(exited, "the exit");
    expect(screen.read()).toBe("bot › Both read.\nbot › Third.\n");
    // Two turns for three lines: counting finals against lines would still be waiting.
    expect(model.requests).toHaveLength(2);
    expect(JSON.stringify(model.requests[0]!.messages.at(-1))).toContain("one\\n\\ntwo");
    expect(channel.pending).toBe(0);
  });

  it("piped input that ends while a coalesced burst is still being answered", async () => {
    const model = scriptedModel([{ text: "All three." }]);
    const { input, screen, exited } = await chat(model, { agent: { debounceMs: 100 } });
    input.end("one\ntwo\nthree\n");
    await until(exited, "the exit");
    expect(screen.read()).toBe("bot › All three.\n");
    expect(model.requests).toHaveLength(1);
  });

  it("piped input: a background (system) message answered in the same session does not count as an answer to a line", async () => {
    const model = scriptedModel([{ text: "Background done." }, { text: "Line answered." }]);
    const { input, screen, exited } = await chat(model);
    await harness!.runtime.bus.publishInbound({
      id: "system-1",
      channel: "system",
      chatId: "cli:local",
      senderId: "cron",
      content: "a scheduled reminder fired",
      media: [],
      mentions: [],
      receivedAt: Date.now(),
      metadata: {},
    });
    input.end("question\n");
    await until(exited, "the exit");
    expect(screen.read()).toBe("bot › Background done.\nbot › Line answered.\n");
  });

  it("/exit leaves", async () => {
    const { input, channel } = await chat(scriptedModel([]));
    input.write("/exit\n");
    await channel.done;
  });
});

describe("CliChannel on a terminal", () => {
  it("renders the reply's Markdown block by block: no literal markers, each block once, in order", async () => {
    const markdown = createTerminalMarkdown({ color: false });
    // The reply streams in pieces that cut blocks and markers in half.
    const pieces = ["Here is **the pl", "an**:\n\n- first **st", "ep**\n- second `step`\n\n``", "`\nnpm test\n```\n\nDone, *re", "ally*."];
    const { input, screen, channel } = await chat(scriptedModel([{ text: pieces }]), {}, { markdown });
    input.write("plan it\n");
    await until(() => channel.pending === 0 && screen.read().includes("Done"), "the reply");
    const shown = screen.read();
    expect(shown).not.toMatch(/\*\*|`|\*really\*/);
    expect(shown).toMatch(/^bot › Here is the plan:\n\n {2}\* first step\n {2}\* second step\n\n {2}npm test\n\nDone, really\.\n$/);
    await channel.exit();
  });

  it("shows the indicator while a reply is awaited, hides it before text and tool lines, and again at the end", async () => {
    const events: string[] = [];
    const screen = terminal();
    const indicator: ReplyIndicator = {
      show: (label, since) => void events.push(`show ${label} since ${since}`),
      hide: () => void events.push("hide"),
    };
    // What is printed, in the same record, so the order against the indicator shows.
    const output = Object.assign(
      new Writable({
        write(chunk: Buffer, _encoding, callback) {
          events.push(`print ${JSON.stringify(chunk.toString("utf8"))}`);
          screen.output.write(chunk, callback);
        },
      }),
      { isTTY: false },
    );
    const model = scriptedModel([{ toolCalls: [{ name: "list_dir", arguments: {} }] }, { text: "All **clear**." }]);
    const { input, channel } = await chat(model, {}, { output, indicator, markdown: createTerminalMarkdown({ color: false }) });
    input.write("look\n");
    await until(() => channel.pending === 0 && screen.read().includes("All clear."), "the reply");
    const printed = events.filter((event) => event.startsWith("print"));
    expect(printed).toEqual(['print "  ↳ list_dir({})\\n"', 'print "bot › All clear.\\n"']);
    // Shown once the line was sent; hidden before each print; shown again after the tool line; hidden at the end.
    const toolLine = events.indexOf(printed[0]!);
    const replyLine = events.indexOf(printed[1]!);
    expect(events[0]).toBe("show thinking since 0");
    expect(events[toolLine - 1]).toBe("hide");
    expect(events.slice(toolLine + 1, replyLine)).toContain("show thinking since 0");
    expect(events[replyLine - 1]).toBe("hide");
    expect(events.slice(replyLine + 1).every((event) => event === "hide")).toBe(true);
    await channel.exit();
  });
});
