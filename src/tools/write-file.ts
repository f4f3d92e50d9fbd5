/**
 * The `write_file` tool: creates or replaces a text file in the workspace, atomically, creating its
 * parent directories. Paths go through the workspace guard; the content has a size cap.
 */
import { z } from "zod";
import { ToolError } from "../errors.js";
import { defineTool, type Tool } from "./tool.js";
import { writeWorkspaceFile } from "./workspace-files.js";
import { workspaceRelative } from "./workspace-path.js";

const parameters = z.object({
  path: z.string().min(1).describe("File path, relative to the workspace. Missing parent directories are created."),
  content: z.string().describe("The whole new content of the file."),
});

export interface WriteFileToolOptions {
  /** Largest content, in UTF-8 bytes, the tool will write. */
  maxBytes: number;
}

export function createWriteFileTool(options: WriteFileToolOptions): Tool<typeof parameters> {
  return defineTool({
    name: "write_file",
    description: "Create or overwrite a text file in the workspace with the given content (the whole file). To change part of a file, use edit_file.",
    parameters,
    async execute(args, context) {
      const size = Buffer.byteLength(args.content, "utf8");
      if (size > options.maxBytes) {
        throw new ToolError(
          `the content is ${size} bytes, more than the ${options.maxBytes}-byte limit for one write`,
          "Write a smaller file, or split the content over several files.",
        );
      }
      const { file, bytes } = await writeWorkspaceFile(args.path, args.content, context);
      return `Wrote ${bytes} bytes to ${workspaceRelative(file, context.workspace)}.`;
    },
  });
}
