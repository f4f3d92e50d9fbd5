import { open, stat } from "node:fs/promises";
import { z } from "zod";
import { ToolError } from "../errors.js";
import { defineTool, type Tool } from "./tool.js";
import { resolveWorkspacePath } from "./workspace-path.js";

const parameters = z.object({
  path: z.string().min(1).describe("File path, relative to the workspace."),
  offset: z.number().int().min(1).optional().describe("First line to return (1-based)."),
  limit: z.number().int().min(1).optional().describe("How many lines to return."),
});

export function createReadFileTool(options: { maxBytes: number }): Tool<typeof parameters> {
  return defineTool({
    name: "read_file",
    description: "Read a text file from the workspace. Use offset/limit for large files.",
    parameters,
    async execute(args, context) {
      const file = await resolveWorkspacePath(args.path, context);
      const info = await stat(file).catch(() => undefined);
      if (!info) throw new ToolError(`file "${args.path}" does not exist`, "Check the name with list_dir.");
      if (info.isDirectory()) throw new ToolError(`"${args.path}" is a directory`, "Use list_dir to see its contents.");
      // A hard link inside the workspace can name a file outside it (`ln /etc/shadow x`).
      if (context.restrictToWorkspace && info.nlink > 1) {
        throw new ToolError(`"${args.path}" has ${info.nlink} hard links, so it may be a file from outside the workspace`, "Copy the content into a new file instead of linking it.");
      }
      const handle = await open(file, "r");
      try {
        const length = Math.min(info.size, options.maxBytes);
        const buffer = Buffer.alloc(length);
        await handle.read(buffer, 0, length, 0);
        if (buffer.includes(0)) throw new ToolError(`"${args.path}" is a binary file`, "Only text files can be read.");
        let text = buffer.toString("utf8");
        if (args.offset !== undefined || args.limit !== undefined) {
          const lines = text.split("\n");
          const start = (args.offset ?? 1) - 1;
          text = lines.slice(start, args.limit === undefined ? undefined : start + args.limit).join("\n");
        }
        if (info.size > options.maxBytes) {
          text += `\n[truncated: the file has ${info.size} bytes, only the first ${options.maxBytes} were read; use offset/limit]`;
        }
        return text;
      } finally {
        await handle.close();
      }
    },
  });
}
