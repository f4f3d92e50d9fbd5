/**
 * The `message` tool: the model sends a message mid-turn, to the chat it is serving by default.
 * Another chat is closed by default: only session keys listed in `tools.message.allowedTargets`
 * can be reached, so a prompt injection cannot make the bot write to chats it was never asked to.
 */
import { z } from "zod";
import { ToolError } from "../errors.js";
import { defineTool, type Tool } from "./tool.js";

const parameters = z.object({
  content: z.string().describe("The message text."),
  target: z
    .string()
    .optional()
    .describe("Session key `channel:chat_id` of the chat to send to. Leave it out for the current chat; other chats only where the config allows them."),
});

/** A chat to send to, outside the current turn. */
export interface MessageTarget {
  channel: string;
  chatId: string;
}

export interface MessageToolOptions {
  /** Session keys (`channel:chat_id`) reachable besides the current chat: `tools.message.allowedTargets`. */
  allowedTargets: readonly string[];
  /** Sends to another chat. Without it only the current chat can be reached. */
  sendTo?: (target: MessageTarget, content: string) => Promise<void>;
}

export function createMessageTool(options: MessageToolOptions): Tool<typeof parameters> {
  const allowed = new Set(options.allowedTargets);
  return defineTool({
    name: "message",
    description:
      "Send a message to the user now, before the turn ends: progress on a long task, or something they must see " +
      "right away. Your final reply is sent anyway; do not repeat it here.",
    parameters,
    async execute(args, context) {
      if (args.content.trim() === "") throw new ToolError("`content` is empty", "Send the message text in `content`.");
      const current = `${context.channel}:${context.chatId}`;
      const target = args.target?.trim() || current;

      if (target === current || target === context.sessionKey) {
        if (!context.send) {
          throw new ToolError("this chat cannot receive messages during a turn", "Put the message in your final reply instead.");
        }
        await context.send(args.content);
        return `Message sent to ${current}.`;
      }

      const parsed = parseTarget(target);
      if (!parsed) {
        throw new ToolError(
          `target "${target}" is not a session key`,
          'Use the form "channel:chat_id" (e.g. "telegram:12345"), or leave target out to send to the current chat.',
        );
      }
      if (!allowed.has(target)) {
        throw new ToolError(
          `sending to "${target}" is not allowed: only the current chat and the chats listed in the config field tools.message.allowedTargets can be reached`,
          `Leave target out to send to the current chat, or tell the user that "${target}" must be added to tools.message.allowedTargets.`,
        );
      }
      if (!options.sendTo) {
        throw new ToolError(`sending to other chats ("${target}") is not available here`, "Leave target out to send to the current chat.");
      }
      await options.sendTo(parsed, args.content);
      return `Message sent to ${target}.`;
    },
  });
}

/** `channel:chat_id` → its parts; the chat id may itself contain colons. */
function parseTarget(target: string): MessageTarget | undefined {
  const separator = target.indexOf(":");
  if (separator <= 0 || separator === target.length - 1) return undefined;
  return { channel: target.slice(0, separator), chatId: target.slice(separator + 1) };
}
