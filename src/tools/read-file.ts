import { z } from "zod";
import { ToolError } from "../errors.js";
import { defineTool, type Tool } from "./tool.js";
import { readWorkspaceFile } from "./workspace-files.js";

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
      // Regular files only, opened without following links and without blocking (workspace-files.ts).
      const { data: buffer, size } = await readWorkspaceFile(args.path, context, { maxBytes: options.maxBytes });
      if (buffer.includes(0)) throw new ToolError(`"${args.path}" is a binary file`, "Only text files can be read.");
      let text = buffer.toString("utf8");
      if (args.offset !== undefined || args.limit !== undefined) {
        const lines = text.split("\n");
        const start = (args.offset ?? 1) - 1;
        text = lines.slice(start, args.limit === undefined ? undefined : start + args.limit).join("\n");
      }
      if (size > options.maxBytes) {
        text += `\n[truncated: the file has ${size} bytes, only the first ${options.maxBytes} were read; use offset/limit]`;
      }
      return text;
    },
  });
}
