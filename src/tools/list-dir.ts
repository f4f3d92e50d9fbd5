import { z } from "zod";
import { defineTool, type Tool } from "./tool.js";
import { listWorkspaceDirectory } from "./workspace-files.js";

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
      // Opened without following links, then listed through its descriptor (workspace-files.ts).
      const entries = await listWorkspaceDirectory(args.path, context);
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
