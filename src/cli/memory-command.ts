/**
 * `countbot memory`: the operator reads and fixes a chat's long-term memory as Markdown, wherever
 * the deployment keeps it (`MEMORY.md` files in the workspace, or Redis when REDIS_URL /
 * redis.url is set). Starts no bus consumer. In global scope every session names the one memory.
 *
 *   countbot memory show SESSION                 print it, with where it is kept
 *   countbot memory export SESSION [-o FILE]     the Markdown, to stdout or FILE
 *   countbot memory import SESSION FILE          replace it with FILE's Markdown (`-`: stdin)
 *
 * With `--person`, SESSION names a person instead (`discord:123`, or a name `memory.identities`
 * links accounts under; an account linked to a name is that name's memory): their person memory.
 */
import { readFile } from "node:fs/promises";
import { createInfrastructure } from "../app/infrastructure.js";
import type { MemoryStore } from "../memory/memory.js";
import { createPersonMemory } from "../memory/person-memory.js";
import { ConfigError, ToolError, errorMessage } from "../errors.js";
import { writeFileAtomic } from "../store/file-io.js";
import { type CliContext, loadCliConfig } from "./setup.js";

const usage = "usage: countbot memory show SESSION | export SESSION [-o FILE] | import SESSION FILE (each with --person PERSON instead of SESSION)";

export type MemoryCommand = ({ action: "show" } | { action: "export"; output?: string } | { action: "import"; input: string }) & {
  session: string;
  /** `session` names a person: their person memory. */
  person?: boolean;
};

/** A failure the operator can act on: one line on stderr, exit 1. */
class MemoryCommandError extends Error {
  override name = "MemoryCommandError";
}

export async function runMemoryCommand(command: MemoryCommand, context: CliContext = {}): Promise<number> {
  if (command.person !== true && !/^[^:\s]+:\S+$/.test(command.session)) {
    throw new ConfigError(`SESSION is a session key \`channel:chat_id\` (e.g. telegram:42), got "${command.session}"; ${usage}`);
  }
  const { config, logger } = loadCliConfig(context);
  const linkedName = command.person === true && Object.hasOwn(config.memory.identities, command.session);
  // `telegram:42`, `web:abc`: a bare chat id is the usual mistake.
  if (command.person === true && !linkedName && !/^[^:\s]+:\S+$/.test(command.session)) {
    const names = Object.keys(config.memory.identities);
    throw new ConfigError(`with --person, the argument is an account \`channel:sender_id\` (e.g. discord:123)${names.length > 0 ? ` or one of the linked names ${names.join(", ")}` : ""}, got "${command.session}"; ${usage}`);
  }
  const infrastructure = await createInfrastructure(config, logger);
  try {
    if (command.person === true) {
      const people = createPersonMemory(infrastructure.memory({ workspace: config.workspace, scope: "person" }), config.memory.identities);
      await run(people.store, { ...command, session: people.keyOf(command.session) }, `the person memory of ${command.session}`);
    } else {
      const memory = infrastructure.memory({ workspace: config.workspace, scope: config.memory.scope });
      await run(memory, command, memory.scope === "global" ? "the global memory (memory.scope is global)" : `the memory of ${command.session}`);
    }
    return 0;
  } catch (error) {
    if (!(error instanceof MemoryCommandError)) throw error;
    process.stderr.write(`countbot: ${error.message}\n`);
    return 1;
  } finally {
    await infrastructure.close();
  }
}

async function run(memory: MemoryStore, command: MemoryCommand, scope: string): Promise<void> {
  const location = memory.location(command.session);
  switch (command.action) {
    case "show": {
      const content = await memory.read(command.session);
      process.stdout.write(content.trim() === "" ? `${scope} is empty (${location})\n` : `# ${scope}, ${location}\n\n${content.endsWith("\n") ? content : `${content}\n`}`);
      return;
    }
    case "export": {
      const content = await memory.read(command.session);
      if (command.output === undefined) {
        process.stdout.write(content);
        return;
      }
      await writeFileAtomic(command.output, content).catch((error: unknown) => {
        throw new MemoryCommandError(`cannot write ${command.output}: ${errorMessage(error)}`);
      });
      process.stdout.write(`exported ${Buffer.byteLength(content, "utf8")} bytes from ${location} to ${command.output}\n`);
      return;
    }
    case "import": {
      const content = await readInput(command.input);
      try {
        await memory.write(command.session, content);
      } catch (error) {
        if (error instanceof ToolError) throw new MemoryCommandError(`${error.message}: shorten ${command.input} and import it again`);
        throw error;
      }
      process.stdout.write(`imported ${Buffer.byteLength(content, "utf8")} bytes into ${location}\n`);
    }
  }
}

async function readInput(input: string): Promise<string> {
  try {
    if (input !== "-") return await readFile(input, "utf8");
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  } catch (error) {
    throw new MemoryCommandError(`cannot read ${input}: ${errorMessage(error)}`);
  }
}
