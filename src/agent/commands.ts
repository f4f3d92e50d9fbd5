/** Chat commands every channel understands. `/stop` is acted on before queueing (it must not wait). */
export type ChatCommand = "new" | "stop" | "help" | "status";

const commands: ReadonlySet<string> = new Set<ChatCommand>(["new", "stop", "help", "status"]);

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
  "/help: this list",
].join("\n");
