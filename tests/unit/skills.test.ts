import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { formatSkillsForPrompt, loadSkills, type Skill } from "../../src/agent/skills.js";

let workspace: string;

beforeEach(async () => {
  workspace = await mkdtemp(path.join(os.tmpdir(), "countbot-skills-"));
});

afterEach(async () => {
  await rm(workspace, { recursive: true, force: true });
});

async function writeSkill(directory: string, text: string, file = "SKILL.md"): Promise<string> {
  const skillDir = path.join(workspace, "skills", directory);
  await mkdir(skillDir, { recursive: true });
  await writeFile(path.join(skillDir, file), text);
  return path.join(skillDir, file);
}

describe("loadSkills", () => {
  it("has no skills and no errors when the skills directory is missing", async () => {
    expect(await loadSkills(workspace)).toEqual({ skills: [], errors: [] });
    expect(await loadSkills(path.join(workspace, "does-not-exist"))).toEqual({ skills: [], errors: [] });
  });

  it("reads the frontmatter and the body", async () => {
    const frontmatter = "name: weather-lookup\ndescription: Look up the weather with curl\nalways: true\nmetadata: {emoji: '☀'}";
    const file = await writeSkill("weather", `---\n${frontmatter}\n---\n\n# Weather\n\nRun \`curl wttr.in\`.\n`);
    const skill = { name: "weather-lookup", description: "Look up the weather with curl", always: true };
    expect(await loadSkills(workspace)).toEqual({
      skills: [{ ...skill, body: "# Weather\n\nRun `curl wttr.in`.", path: file }],
      errors: [],
    });
  });

  it("defaults the name to the directory and always to false, and accepts CRLF and a BOM", async () => {
    const file = await writeSkill("github", "\uFEFF---\r\ndescription: Work with GitHub via gh\r\n---\r\nUse gh.\r\n");
    const { skills, errors } = await loadSkills(workspace);
    expect(errors).toEqual([]);
    expect(skills).toEqual([{ name: "github", description: "Work with GitHub via gh", always: false, body: "Use gh.", path: file }]);
  });

  it("reports each malformed skill and still loads the others, sorted by name", async () => {
    await writeSkill("zeta", "---\ndescription: last\n---\nz");
    await writeSkill("alpha", "---\nname: mu\ndescription: renamed\n---\nm");
    const noFrontmatter = await writeSkill("plain", "# Just markdown\n");
    const badYaml = await writeSkill("bad-yaml", "---\ndescription: [unclosed\n---\nbody");
    const noDescription = await writeSkill("no-description", "---\nname: nameless\n---\nbody");
    const badAlways = await writeSkill("bad-always", "---\ndescription: x\nalways: sometimes\n---\nbody");
    const list = await writeSkill("list", "---\n- a\n- b\n---\nbody");
    const unclosed = await writeSkill("unclosed", "---\ndescription: x\nbody without a closing line");
    const duplicate = await writeSkill("zz-duplicate", "---\nname: zeta\ndescription: clash\n---\nbody");
    await mkdir(path.join(workspace, "skills", "empty-dir"));
    await writeFile(path.join(workspace, "skills", "README.md"), "not a skill directory");
    await writeSkill(".hidden", "---\ndescription: ignored\n---\n");

    const { skills, errors } = await loadSkills(workspace);
    expect(skills.map((skill) => [skill.name, skill.description])).toEqual([
      ["mu", "renamed"],
      ["zeta", "last"],
    ]);
    const byPath = new Map(errors.map((error) => [error.path, error.message]));
    expect(byPath.get(noFrontmatter)).toMatch(/no frontmatter/);
    expect(byPath.get(badYaml)).toMatch(/not valid YAML/);
    expect(byPath.get(noDescription)).toMatch(/`description`/);
    expect(byPath.get(badAlways)).toMatch(/`always`.*boolean/);
    expect(byPath.get(list)).toMatch(/YAML mapping/);
    expect(byPath.get(unclosed)).toMatch(/no frontmatter/);
    expect(byPath.get(duplicate)).toMatch(/already named "zeta"/);
    expect(byPath.get(path.join(workspace, "skills", "empty-dir", "SKILL.md"))).toMatch(/no SKILL\.md/);
    expect(errors).toHaveLength(8);
  });

  it("accepts an empty body", async () => {
    await writeSkill("empty", "---\ndescription: nothing to say\n---");
    expect((await loadSkills(workspace)).skills).toEqual([expect.objectContaining({ name: "empty", body: "" })]);
  });
});

describe("formatSkillsForPrompt", () => {
  const skill = (name: string, always: boolean, description = `${name} things`): Skill => ({
    name,
    description,
    always,
    body: `Body of ${name}.`,
    path: `/workspace/skills/${name}/SKILL.md`,
  });

  it("puts always-on bodies under headings and the others in one line each", () => {
    const { alwaysOn, summary } = formatSkillsForPrompt([
      skill("memory-habits", true),
      skill("weather", false, "Weather\n  via curl"),
      skill("style", true),
      skill("github", false),
    ]);
    expect(alwaysOn).toBe("## Skill: memory-habits\n\nBody of memory-habits.\n\n## Skill: style\n\nBody of style.");
    expect(summary).toBe(
      "- weather — Weather via curl — /workspace/skills/weather/SKILL.md\n- github — github things — /workspace/skills/github/SKILL.md",
    );
  });

  it("returns empty strings when there is nothing to show", () => {
    expect(formatSkillsForPrompt([])).toEqual({ alwaysOn: "", summary: "" });
  });
});
