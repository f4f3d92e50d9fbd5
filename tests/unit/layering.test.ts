/**
 * The layering rules (.dependency-cruiser.cjs) bite: wrong imports in a scratch tree are caught,
 * each by the rule that names it, and the project itself has none.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { cruise } from "dependency-cruiser";
import { afterEach, describe, expect, it } from "vitest";

const require = createRequire(import.meta.url);
const projectRoot = fileURLToPath(new URL("../../", import.meta.url));
const rules = require(path.join(projectRoot, ".dependency-cruiser.cjs")) as { forbidden: unknown[] };

let scratch: string | undefined;
afterEach(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
  scratch = undefined;
});

async function tree(files: Record<string, string>): Promise<string> {
  scratch = await mkdtemp(path.join(tmpdir(), "countbot-layers-"));
  for (const [file, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(scratch, file)), { recursive: true });
    await writeFile(path.join(scratch, file), content);
  }
  return scratch;
}

async function violations(baseDir: string): Promise<Array<[rule: string, from: string, to: string]>> {
  const result = await cruise(["src", "channels"], { validate: true, ruleSet: { forbidden: rules.forbidden } as never, baseDir, tsPreCompilationDeps: true }, {}, {});
  if (typeof result.output === "string") throw new Error("expected a structured result");
  return result.output.summary.violations.map((violation) => [violation.rule.name, violation.from, violation.to]);
}

describe("layering rules", () => {
  it("catch an import that runs back up, one sideways into a sibling layer, a circle and a platform importing another", async () => {
    const root = await tree({
      "src/jobs/job.ts": "export const job = 1;\n",
      "src/store/task.ts": 'import { job } from "../jobs/job.js";\nexport const task = job;\n',
      "src/gateway/runtime.ts": 'import { job } from "../jobs/job.js";\nexport const runtime = job;\n',
      "src/bus/a.ts": 'import { b } from "./b.js";\nexport const a = () => b;\n',
      "src/bus/b.ts": 'import { a } from "./a.js";\nexport const b = () => a;\n',
      "channels/discord/plugin.ts": 'import { helper } from "../telegram/helper.js";\nexport const plugin = helper;\n',
      "channels/telegram/helper.ts": 'import { job } from "../../src/jobs/job.js";\nexport const helper = job;\n',
      "src/misc/thing.ts": 'import { job } from "../jobs/job.js";\nexport const thing = job;\n',
    });
    const found = await violations(root);
    expect(found).toEqual(
      expect.arrayContaining([
        ["layer-store", "src/store/task.ts", "src/jobs/job.ts"],
        ["layer-gateway", "src/gateway/runtime.ts", "src/jobs/job.ts"],
        ["no-circular", "src/bus/a.ts", "src/bus/b.ts"],
        ["platform-apart", "channels/discord/plugin.ts", "channels/telegram/helper.ts"],
        ["everything-in-a-layer", "src/misc/thing.ts", "src/jobs/job.ts"],
      ]),
    );
    // channels → jobs runs downward: allowed.
    expect(found.filter(([, from]) => from === "channels/telegram/helper.ts")).toEqual([]);
  });

  it("find nothing wrong in the project", async () => {
    const result = await cruise(["src", "channels"], {
      validate: true,
      ruleSet: { forbidden: rules.forbidden } as never,
      baseDir: projectRoot,
      tsPreCompilationDeps: true,
      exclude: { path: "node_modules" },
    }, {}, {});
    if (typeof result.output === "string") throw new Error("expected a structured result");
    expect(result.output.summary.violations).toEqual([]);
    expect(result.output.summary.totalCruised).toBeGreaterThan(100);
  });
});
