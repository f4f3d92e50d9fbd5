/**
 * Skills: instructions the user drops into `<workspace>/skills/<name>/SKILL.md`, in the format of
 * nanobot and OpenClaw (YAML frontmatter, then Markdown). An `always` skill goes into every system
 * prompt in full; the others are listed in one line each and the model reads one when it needs it.
 *
 * ```markdown
 * ---
 * name: weather            # optional, defaults to the directory name
 * description: Look up the weather with curl and wttr.in
 * always: false            # optional
 * ---
 * How to ...
 * ```
 */
import { constants } from "node:fs";
import { open, readdir, stat } from "node:fs/promises";
import path from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";

export interface Skill {
  name: string;
  description: string;
  /** Whether the whole body goes into every system prompt. */
  always: boolean;
  /** The Markdown after the frontmatter, trimmed. */
  body: string;
  /** Absolute path of the SKILL.md. */
  path: string;
}

/** A skill that could not be loaded; the others load regardless. */
export interface SkillError {
  path: string;
  message: string;
}

export interface LoadedSkills {
  /** Sorted by name. */
  skills: Skill[];
  errors: SkillError[];
}

const SKILL_FILE = "SKILL.md";

// Other keys (metadata, requirements, ...) are allowed and ignored, so skills written for nanobot
// or OpenClaw load as they are.
const FrontmatterSchema = z.object({
  name: z.string().trim().min(1, "must not be empty").optional(),
  description: z.string().trim().min(1, "is required: one line saying what the skill is for"),
  always: z.boolean().default(false),
});

const FRONTMATTER = /^\uFEFF?---[ \t]*\r?\n(?:([\s\S]*?)\r?\n)?---[ \t]*(?:\r?\n|$)/;

export async function loadSkills(workspace: string): Promise<LoadedSkills> {
  const skillsDir = path.join(workspace, "skills");
  let names: string[];
  try {
    names = await readdir(skillsDir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return { skills: [], errors: [] };
    throw error;
  }

  const skills: Skill[] = [];
  const errors: SkillError[] = [];
  for (const directory of names.sort()) {
    if (directory.startsWith(".")) continue;
    const directoryPath = path.join(skillsDir, directory);
    if (!(await isDirectory(directoryPath))) continue;
    const file = path.join(directoryPath, SKILL_FILE);
    let text: string;
    try {
      text = await readRegularFile(file);
    } catch (error) {
      const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
      errors.push({ path: file, message: missing ? `no ${SKILL_FILE} in skills/${directory}` : String(error) });
      continue;
    }
    const parsed = parseSkill(text, directory, file);
    if ("message" in parsed) {
      errors.push(parsed);
    } else if (skills.some((skill) => skill.name === parsed.name)) {
      errors.push({ path: file, message: `another skill is already named "${parsed.name}"; rename one of them` });
    } else {
      skills.push(parsed);
    }
  }
  skills.sort((left, right) => (left.name < right.name ? -1 : left.name > right.name ? 1 : 0));
  return { skills, errors };
}

function parseSkill(text: string, directory: string, file: string): Skill | SkillError {
  const match = FRONTMATTER.exec(text);
  if (!match) return { path: file, message: "no frontmatter: the file must start with a `---` line, the YAML, then `---`" };
  let data: unknown;
  try {
    data = parseYaml(match[1] ?? "") ?? {};
  } catch (error) {
    return { path: file, message: `the frontmatter is not valid YAML: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    return { path: file, message: "the frontmatter must be a YAML mapping (key: value lines)" };
  }
  const result = FrontmatterSchema.safeParse(data);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `\`${issue.path.join(".") || "frontmatter"}\` ${issue.message}`);
    return { path: file, message: `invalid frontmatter: ${problems.join("; ")}` };
  }
  const { name, description, always } = result.data;
  return { name: name ?? directory, description, always, body: text.slice(match[0].length).trim(), path: file };
}

/**
 * The file's text, refusing anything but a regular file without blocking: a FIFO planted as a
 * SKILL.md (exec can make one) would otherwise hold a thread of the pool on open, every turn.
 * Links are followed on purpose: operators link skills in from elsewhere.
 */
async function readRegularFile(file: string): Promise<string> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    if (!(await handle.stat()).isFile()) throw new Error(`${file} is not a regular file`);
    return await handle.readFile("utf8");
  } finally {
    await handle.close();
  }
}

async function isDirectory(candidate: string): Promise<boolean> {
  try {
    return (await stat(candidate)).isDirectory(); // follows symlinks, so linked skills count
  } catch {
    return false;
  }
}

/** The skill parts of the system prompt. Either string is empty when there is nothing to say. */
export function formatSkillsForPrompt(skills: Skill[]): { alwaysOn: string; summary: string } {
  const alwaysOn = skills
    .filter((skill) => skill.always)
    .map((skill) => `## Skill: ${skill.name}\n\n${skill.body}`)
    .join("\n\n");
  const summary = skills
    .filter((skill) => !skill.always)
    .map((skill) => `- ${oneLine(skill.name)} — ${oneLine(skill.description)} — ${skill.path}`)
    .join("\n");
  return { alwaysOn, summary };
}

/** Frontmatter can hold multi-line strings; the summary must stay one line per skill. */
function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}
