import { describe, expect, it } from "vitest";
import { ToolError } from "../../../src/errors.js";
import { type MessageTarget, createMessageTool } from "../../../src/tools/message.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import type { ToolContext } from "../../../src/tools/tool.js";

interface Sent {
  target: string;
  content: string;
}

function setup(options: { allowedTargets?: string[]; withSendTo?: boolean; withSend?: boolean } = {}) {
  const sent: Sent[] = [];
  const sendTo = async (target: MessageTarget, content: string) => {
    sent.push({ target: `${target.channel}|${target.chatId}`, content });
  };
  const tool = createMessageTool({ allowedTargets: options.allowedTargets ?? [], sendTo: options.withSendTo === false ? undefined : sendTo });
  const context: ToolContext = {
    sessionKey: "telegram:42",
    channel: "telegram",
    chatId: "42",
    workspace: "/nonexistent",
    restrictToWorkspace: true,
    signal: new AbortController().signal,
    send:
      options.withSend === false
        ? undefined
        : async (content) => {
            sent.push({ target: "current", content });
          },
  };
  const registry = new ToolRegistry().register(tool);
  const call = (args: unknown) => registry.execute({ id: "call-1", name: "message", arguments: JSON.stringify(args) }, context);
  return { tool, context, sent, call };
}

describe("message tool", () => {
  it("sends to the current chat by default", async () => {
    const { tool, context, sent } = setup();
    await expect(tool.execute({ content: "working on it…" }, context)).resolves.toBe("Message sent to telegram:42.");
    expect(sent).toEqual([{ target: "current", content: "working on it…" }]);
  });

  it("treats the current chat named explicitly (or null, a model quirk) as the current chat", async () => {
    const { sent, call } = setup();
    expect((await call({ content: "a", target: "telegram:42" })).content).toBe("Message sent to telegram:42.");
    expect((await call({ content: "b", target: null })).content).toBe("Message sent to telegram:42.");
    expect(sent).toEqual([
      { target: "current", content: "a" },
      { target: "current", content: "b" },
    ]);
  });

  it("refuses another chat by default, naming the target and the config field, and sends nothing", async () => {
    const { sent, call } = setup();
    const outcome = await call({ content: "hello there", target: "discord:7" });
    expect(outcome.success).toBe(false);
    expect(outcome.content).toMatch(/^Error: sending to "discord:7" is not allowed.*\. Next: /);
    expect(outcome.content).toContain("tools.message.allowedTargets");
    expect(sent).toEqual([]);
  });

  it("refuses a chat that is not listed even when others are", async () => {
    const { sent, call } = setup({ allowedTargets: ["discord:7"] });
    const outcome = await call({ content: "x", target: "discord:8" });
    expect(outcome.content).toMatch(/^Error: sending to "discord:8" is not allowed/);
    expect(sent).toEqual([]);
  });

  it("sends to a listed chat through sendTo, keeping colons in the chat id", async () => {
    const { sent, call } = setup({ allowedTargets: ["discord:7", "feishu:oc_1:thread"] });
    expect((await call({ content: "ping", target: "discord:7" })).content).toBe("Message sent to discord:7.");
    expect((await call({ content: "pong", target: "feishu:oc_1:thread" })).content).toBe("Message sent to feishu:oc_1:thread.");
    expect(sent).toEqual([
      { target: "discord|7", content: "ping" },
      { target: "feishu|oc_1:thread", content: "pong" },
    ]);
  });

  it("refuses a listed chat when no sendTo was wired", async () => {
    const { sent, call } = setup({ allowedTargets: ["discord:7"], withSendTo: false });
    expect((await call({ content: "x", target: "discord:7" })).content).toMatch(/^Error: sending to other chats \("discord:7"\) is not available here\. Next: /);
    expect(sent).toEqual([]);
  });

  it("refuses a target that is not a session key", async () => {
    const { sent, call } = setup({ allowedTargets: ["discord"] });
    expect((await call({ content: "x", target: "discord" })).content).toMatch(/^Error: target "discord" is not a session key\. Next: Use the form "channel:chat_id"/);
    expect(sent).toEqual([]);
  });

  it("refuses empty content", async () => {
    const { tool, context, sent, call } = setup();
    await expect(tool.execute({ content: "  \n" }, context)).rejects.toBeInstanceOf(ToolError);
    expect((await call({ content: "" })).content).toBe("Error: `content` is empty. Next: Send the message text in `content`.");
    expect((await call({})).content).toMatch(/^Error: invalid arguments for message: `content`/);
    expect(sent).toEqual([]);
  });

  it("says so when the current chat cannot receive messages mid-turn", async () => {
    const { sent, call } = setup({ withSend: false });
    expect((await call({ content: "x" })).content).toMatch(/^Error: this chat cannot receive messages during a turn\. Next: /);
    expect(sent).toEqual([]);
  });
});
