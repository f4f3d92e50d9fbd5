import { readdir } from "node:fs/promises";
import { z } from "zod";
import { ToolError } from "../errors.js";
import { defineTool, type Tool } from "./tool.js";
import { resolveWorkspacePath } from "./workspace-path.js";

const parameters = z.object({
  path: z.string().default(".").describe("Directory path, relative to the workspace. Default: the workspace root."),
});

const MAX_ENTRIES = 500;

export function createListDirTool(): Tool<typeof parameters> {
  return defineTool({
    name: "list_dir",
    description: "List a directory of the workspace: one entry per line, directories end with /.",
    parameters,
    async execute(args, context) {
      const directory = await resolveWorkspacePath(args.path, context);
      const entries = await readdir(directory, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") throw new ToolError(`directory "${args.path}" does not exist`, "List its parent to see what exists.");
        if (error.code === "ENOTDIR") throw new ToolError(`"${args.path}" is a file, not a directory`, "Use read_file to read it.");
        throw error;
      });
      if (entries.length === 0) return `(${args.path} is empty)`;
      const lines = entries
        .map((entry) => (entry.isDirectory() ? `${entry.name}/` : entry.isSymbolicLink() ? `${entry.name}@` : entry.name))
        .sort((left, right) => left.localeCompare(right));
      const shown = lines.slice(0, MAX_ENTRIES);
      if (lines.length > MAX_ENTRIES) shown.push(`[${lines.length - MAX_ENTRIES} more entries not shown]`);
      return shown.join("\n");
    },
  });
}
