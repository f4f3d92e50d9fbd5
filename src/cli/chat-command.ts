/**
 * `countbot chat [-s SESSION]`: the whole agent in this process, talking through the terminal. The
 * terminal is a channel like any other: the CLI adapter on the shared channel runtime (admission,
 * dispatcher) over the in-memory bus, with the agent loop consuming the same bus. The banner says
 * what this conversation runs with: model, session, workspace, config file, and what exec runs in.
 */
import { CliChannel } from "../../channels/cli/cli-channel.js";
import { createCliRuntime } from "./cli-runtime.js";
import { createEmbeddedRuntime } from "../app/worker.js";
import { describeConfigSource } from "../config/source.js";
import { type CliContext, loadCliConfig } from "./setup.js";

export async function runChatCommand(values: { session: string; verbose?: boolean } & CliContext): Promise<number> {
  const { config, logger, source } = loadCliConfig({ verbose: values.verbose, runsTools: true, configFile: values.configFile });
  const runtime = await createEmbeddedRuntime(config, logger);
  const channel = new CliChannel({ input: process.stdin, output: process.stdout, chatId: values.session });
  const gateway = createCliRuntime(channel, { bus: runtime.bus, store: runtime.store, logger });
  const loop = runtime.run();
  if (process.stdout.isTTY) {
    process.stdout.write(
      `CountBot: model ${runtime.model.id}, session ${channel.sessionKey}, workspace ${runtime.workspace}\n` +
        `config: ${describeConfigSource(source)}\n` +
        `sandbox: ${runtime.sandbox}\n` +
        "Type a message. /help lists commands; Ctrl-C stops a reply, twice exits.\n",
    );
  }
  const onTerminate = () => void channel.exit();
  process.once("SIGTERM", onTerminate);
  await gateway.start();
  await channel.done;
  process.off("SIGTERM", onTerminate);
  // The dispatcher first (replies already queued still reach the screen), then the agent.
  await gateway.stop();
  await runtime.close();
  await loop;
  return 0;
}
