/**
 * Chat commands every channel understands: shared vocabulary of the message model. A platform
 * message is parsed once, at admission (the gateway), and the command travels on the
 * InboundMessage (`command`); a worker reads that field, never the text. `/stop` and `/help` are
 * answered at the gateway (they must not wait behind a turn), and so is `/usage` where the gateway
 * can read the budgets (else a worker answers it); `/new` and `/status` reach the worker.
 */
import { z } from "zod";

export const ChatCommandSchema = z.enum(["new", "stop", "help", "status", "usage"]);
export type ChatCommand = z.infer<typeof ChatCommandSchema>;

const commands: ReadonlySet<string> = new Set<string>(ChatCommandSchema.options);

/** `/new`, `/new@my_bot` and ` /NEW ` are all `new`; anything else is not a command. */
export function parseCommand(content: string): ChatCommand | undefined {
  const match = /^\/([a-z]+)(@\w+)?$/i.exec(content.trim());
  const name = match?.[1]?.toLowerCase();
  return name !== undefined && commands.has(name) ? (name as ChatCommand) : undefined;
}

export const helpText = [
  "Commands:",
  "/new: start a new conversation (the old one is archived)",
  "/stop: stop the reply that is being written",
  "/status: show this conversation's state",
  "/usage: show what you and this chat have spent, against your budgets",
  "/help: this list",
].join("\n");
