/**
 * The channel runtime's JSON log lines at debug: every field once per line (a child logger that
 * binds a field its parent already bound writes it twice, which log pipelines reject or mangle).
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { ChannelAdapter, EventSink, PlatformEvent } from "../../../src/gateway/channel.js";
import { createChannelRuntime } from "../../../src/gateway/channel-runtime.js";
import { createLogger } from "../../../src/logger.js";
import { createFileStore } from "../../../src/store/file-store.js";

/** The top-level keys of one JSON object's text, duplicates kept (JSON.parse keeps only the last). */
function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let index = 0; index < line.length; index++) {
    const character = line[index];
    if (character === '"') {
      const start = index;
      for (index++; line[index] !== '"'; index++) if (line[index] === "\\") index++;
      const rest = line.slice(index + 1).trimStart();
      if (depth === 1 && rest.startsWith(":")) keys.push(JSON.parse(line.slice(start, index + 1)) as string);
    } else if (character === "{" || character === "[") depth++;
    else if (character === "}" || character === "]") depth--;
  }
  return keys;
}

class SilentAdapter implements ChannelAdapter {
  readonly name = "chatroom";
  readonly capabilities: ChannelAdapter["capabilities"] = { maxMessageLength: 4_000, streaming: "none", draftIntervalMs: 0, minSendIntervalMs: 0, chatType: "private" };
  sink: EventSink | undefined;
  async start(sink: EventSink) {
    this.sink = sink;
  }
  async stop() {}
  async send() {
    return { platformMessageId: "1" };
  }
  async edit() {}
  async typing() {}
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe("channel runtime log lines", () => {
  it("carry each field once, channel included", async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), "countbot-log-fields-"));
    cleanups.push(() => rm(root, { recursive: true, force: true }));
    const store = createFileStore({ dataDir: path.join(root, "data") });
    cleanups.push(() => store.close());
    const bus = createMemoryBus();
    cleanups.push(() => bus.close());
    const out = new PassThrough();
    let text = "";
    out.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
    const logger = createLogger({ level: "debug", destination: out });
    const adapter = new SilentAdapter();
    const runtime = createChannelRuntime({
      channel: { adapter, policy: { allowFrom: ["7"], groupPolicy: "all", pairing: false, rateLimit: { messages: 2, perMs: 60_000 } } },
      bus,
      store,
      logger,
    });
    await runtime.start();
    cleanups.push(() => runtime.stop());
    const event = (id: string, content: string): PlatformEvent => ({
      eventId: id,
      chatId: "7",
      chatType: "private",
      senderId: "7",
      senderIsBot: false,
      text: content,
      mentionsBot: true,
      repliesToBot: false,
      platformMessageId: id,
      media: [],
      receivedAt: Date.now(),
    });
    // A cancel, a message and a rate-limited one: the runtime's, admission's and the limiter's lines.
    for (const [id, content] of [["e1", "/stop"], ["e2", "hello"], ["e3", "again"]] as const) await adapter.sink!(event(id, content));

    const lines = text.trimEnd().split("\n");
    expect(lines.map((line) => (JSON.parse(line) as { msg: string }).msg)).toEqual(expect.arrayContaining(["cancel requested", "sender rate-limited"]));
    for (const line of lines) {
      const keys = topLevelKeys(line);
      expect(keys.filter((key, index) => keys.indexOf(key) !== index), line).toEqual([]);
      expect(keys, line).toContain("channel");
    }
  });
});
