/** `countbot agent -m "text" [-s SESSION]`: one turn, the reply on stdout, exit 0; failures exit non-zero. */
import { randomUUID } from "node:crypto";
import { createAgentRuntime } from "../app/agent.js";
import type { TurnListener } from "../agent/react-loop.js";
import { startTracing } from "../app/tracing.js";
import { helpText, parseCommand } from "../bus/commands.js";
import { SpanKind, inSpan } from "../tracing.js";
import { type CliContext, loadCliConfig } from "./setup.js";

export async function runAgentCommand(values: { message?: string; session: string; verbose?: boolean } & CliContext): Promise<number> {
  const message = values.message;
  if (message === undefined || message.trim() === "") {
    process.stderr.write('countbot agent: give the message with -m "text"\n');
    return 2;
  }
  const { config, logger, withdrawn } = loadCliConfig({ verbose: values.verbose, runsTools: true, configFile: values.configFile });
  const tracing = await startTracing("agent", logger, withdrawn.environment);
  const runtime = await createAgentRuntime(config, logger);
  const chatId = values.session;
  const sessionKey = `cli:${chatId}`;
  try {
    const command = parseCommand(message);
    if (command === "new") {
      await runtime.agent.resetSession(sessionKey);
      process.stdout.write("Started a new conversation.\n");
      return 0;
    }
    if (command === "status") {
      process.stdout.write(`${await runtime.agent.status(sessionKey)}\n`);
      return 0;
    }
    if (command === "help") {
      process.stdout.write(`${helpText}\n`);
      return 0;
    }
    const interrupt = new AbortController();
    const onSignal = () => interrupt.abort();
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
    try {
      const turn = {
        sessionKey,
        channel: "cli",
        chatId,
        content: message,
        messageIds: [randomUUID()],
        signal: interrupt.signal,
        ...(config.agent.showReasoning ? { listener: reasoningOnStderr() } : {}),
      };
      const result = await inSpan("turn", { kind: SpanKind.SERVER, attributes: { "countbot.session": sessionKey, "countbot.channel": "cli" } }, async (span) => {
        const answered = await runtime.agent.respond(turn);
        span.setAttribute("countbot.outcome", answered.stopReason);
        return answered;
      });
      if (result.stopReason === "error") {
        process.stderr.write(`countbot: the turn failed: ${(result.error?.message ?? "unknown error").replace(/\s*\n\s*/g, "; ")}\n`);
        return 1;
      }
      if (result.stopReason === "cancelled") {
        process.stderr.write("countbot: the turn was cancelled\n");
        return 130;
      }
      process.stdout.write(`${result.reply}\n`);
      return 0;
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  } finally {
    await runtime.close();
    await tracing.shutdown();
  }
}

/** The model's reasoning on stderr as it streams (`agent.showReasoning`), dimmed on a terminal: stdout keeps the answer alone. */
function reasoningOnStderr(): TurnListener {
  const color = Boolean(process.stderr.isTTY) && !process.env.NO_COLOR;
  let midLine = false;
  return (event) => {
    if (event.type === "reasoning") {
      process.stderr.write(color ? `\x1b[2m${event.text}\x1b[22m` : event.text);
      midLine = !event.text.endsWith("\n");
    } else if (midLine) {
      process.stderr.write("\n");
      midLine = false;
    }
  };
}
