/**
 * The `edit_file` tool: replaces one exact piece of text in a workspace file. The text must occur
 * exactly once, so the model never edits a place it did not mean; the write is atomic.
 */
import { z } from "zod";
import { ToolError } from "../errors.js";
import { defineTool, type Tool } from "./tool.js";
import { readWorkspaceFile, writeResolvedFile } from "./workspace-files.js";
import { workspaceRelative } from "./workspace-path.js";

const parameters = z.object({
  path: z.string().min(1).describe("File path, relative to the workspace."),
  old_text: z.string().min(1).describe("The exact text to replace, whitespace included. It must occur exactly once in the file."),
  new_text: z.string().describe("The text to put in its place."),
});

export interface EditFileToolOptions {
  /** Largest file, in UTF-8 bytes, the tool will read or write. */
  maxBytes: number;
}

/** Line numbers shown when the text occurs several times. */
const MAX_LINES_SHOWN = 10;

export function createEditFileTool(options: EditFileToolOptions): Tool<typeof parameters> {
  return defineTool({
    name: "edit_file",
    description: "Replace an exact piece of text in a workspace file with new text. old_text must match exactly once; read the file first to copy it.",
    parameters,
    async execute(args, context) {
      // The same read as read_file's: regular files only, no links followed, hard links refused.
      const { file, data } = await readWorkspaceFile(args.path, context, { refuseAboveBytes: options.maxBytes });
      const original = data.toString("utf8");
      const offsets = occurrences(original, args.old_text);
      if (offsets.length === 0) {
        throw new ToolError(`old_text was not found in "${args.path}"`, "Read the file first and copy the text exactly, including whitespace and line breaks.");
      }
      if (offsets.length > 1) {
        const lines = offsets.map((offset) => lineOf(original, offset));
        const listed = lines.slice(0, MAX_LINES_SHOWN).join(", ") + (lines.length > MAX_LINES_SHOWN ? ", ..." : "");
        throw new ToolError(
          `old_text occurs ${offsets.length} times in "${args.path}" (lines ${listed})`,
          "Include more of the surrounding text in old_text so it matches exactly one place.",
        );
      }
      const offset = offsets[0] as number;
      const updated = original.slice(0, offset) + args.new_text + original.slice(offset + args.old_text.length);
      const size = Buffer.byteLength(updated, "utf8");
      if (size > options.maxBytes) {
        throw new ToolError(`the edited file would be ${size} bytes, more than the ${options.maxBytes}-byte limit`, "Make a smaller edit.");
      }
      await writeResolvedFile(file, args.path, updated, context);
      return `Edited ${workspaceRelative(file, context.workspace)} at line ${lineOf(original, offset)} (${size} bytes now).`;
    },
  });
}

/** Start offsets of every occurrence, overlapping ones included: "aa" in "aaa" is ambiguous too. */
function occurrences(text: string, needle: string): number[] {
  const found: number[] = [];
  for (let index = text.indexOf(needle); index !== -1; index = text.indexOf(needle, index + 1)) found.push(index);
  return found;
}

function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let index = text.indexOf("\n"); index !== -1 && index < offset; index = text.indexOf("\n", index + 1)) line += 1;
  return line;
}
