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
  });

  it("hold a platform to the channel kit, the message model and the errors, and an SDK to its platform's folder", async () => {
    const root = await tree({
      "src/jobs/job.ts": "export const job = 1;\n",
      "src/gateway/kit/index.ts": "export const kit = 1;\n",
      "src/gateway/dispatcher.ts": "export const dispatcher = 1;\n",
      "src/bus/message.ts": "export const message = 1;\n",
      "src/errors.ts": "export const errors = 1;\n",
      // Downward, but past the kit: refused.
      "channels/telegram/helper.ts": 'import { job } from "../../src/jobs/job.js";\nimport { dispatcher } from "../../src/gateway/dispatcher.js";\nexport const helper = [job, dispatcher];\n',
      // The kit, the message model, the errors and its own SDK: allowed.
      "channels/telegram/adapter.ts":
        'import { kit } from "../../src/gateway/kit/index.js";\nimport { message } from "../../src/bus/message.js";\nimport { errors } from "../../src/errors.js";\nimport { Telegraf } from "telegraf";\nexport const adapter = [kit, message, errors, Telegraf];\n',
      // Another platform's SDK, from a platform folder and from the core: refused.
      "channels/feishu/adapter.ts": 'import { Client } from "discord.js";\nexport const adapter = Client;\n',
      "src/gateway/runtime.ts": 'import { Telegraf } from "telegraf";\nimport { WSClient } from "@larksuiteoapi/node-sdk";\nexport const runtime = [Telegraf, WSClient];\n',
    });
    const found = await violations(root);
    expect(found).toEqual(
      expect.arrayContaining([
        ["channel-kit-only", "channels/telegram/helper.ts", "src/jobs/job.ts"],
        ["channel-kit-only", "channels/telegram/helper.ts", "src/gateway/dispatcher.ts"],
        ["sdk-discord", "channels/feishu/adapter.ts", "discord.js"],
        ["sdk-telegram", "src/gateway/runtime.ts", "telegraf"],
        ["sdk-feishu", "src/gateway/runtime.ts", "@larksuiteoapi/node-sdk"],
      ]),
    );
    expect(found.filter(([, from]) => from === "channels/telegram/adapter.ts")).toEqual([]);
  });

  it("keep a gateway process clear of agent code, through the modules it reaches and through types, and the shared layers below the agent", async () => {
    const root = await tree({
      "src/agent/agent.ts": "export const agent = 1;\n",
      "src/agent/turn.ts": "export interface Turn { id: string }\n",
      // jobs → agent is downward, so the layer rules allow it: only the gateway's reach is refused.
      "src/jobs/engine.ts": 'import type { Turn } from "../agent/turn.js";\nexport const engine = (turn: Turn) => turn.id;\n',
      "src/app/gateway.ts": 'import { engine } from "../jobs/engine.js";\nexport const gateway = engine;\n',
      "src/cli/gateway-command.ts": 'import { agent } from "../agent/agent.js";\nimport { gateway } from "../app/gateway.js";\nexport const command = [agent, gateway];\n',
      // A worker runs the agent: allowed.
      "src/cli/worker-command.ts": 'import { agent } from "../agent/agent.js";\nexport const command = agent;\n',
      // What the agent and a gateway share sits below the agent, so it may not reach back up.
      "src/memory/memory.ts": 'import { agent } from "../agent/agent.js";\nexport const memory = agent;\n',
      "src/budget/policy.ts": "export const policy = 1;\n",
      "src/prompt/sections.ts": 'import { policy } from "../budget/policy.js";\nexport const sections = policy;\n',
      "channels/index.ts": "export const channels = [];\n",
    });
    const found = await violations(root);
    expect(found).toEqual(
      expect.arrayContaining([
        ["gateway-no-agent", "src/app/gateway.ts", "src/agent/turn.ts"],
        ["gateway-no-agent", "src/cli/gateway-command.ts", "src/agent/turn.ts"],
        ["gateway-no-agent", "src/cli/gateway-command.ts", "src/agent/agent.ts"],
        ["layer-memory", "src/memory/memory.ts", "src/agent/agent.ts"],
        ["layer-prompt", "src/prompt/sections.ts", "src/budget/policy.ts"],
      ]),
    );
    expect(found.filter(([, from]) => from === "src/cli/worker-command.ts" || from === "src/jobs/engine.ts")).toEqual([]);
  });

  it("find nothing wrong in the project", async () => {
    const result = await cruise(["src", "channels"], {
      validate: true,
      ruleSet: { forbidden: rules.forbidden } as never,
      baseDir: projectRoot,
      tsPreCompilationDeps: true,
      doNotFollow: { path: "node_modules" },
    }, {}, {});
    if (typeof result.output === "string") throw new Error("expected a structured result");
    expect(result.output.summary.violations).toEqual([]);
    expect(result.output.summary.totalCruised).toBeGreaterThan(100);
  });
});
