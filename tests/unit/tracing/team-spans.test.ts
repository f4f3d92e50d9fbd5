/**
 * A team run stays in the trace of what started it: `team_run <team>` under the starter's span,
 * each node's job (`process workflows`) under the run (the first) or under the job that finished
 * the node before it (a pipeline's next stage is queued there), and each agent's `invoke_agent`
 * under its job.
 */
import { afterEach, describe, expect, it } from "vitest";
import { inSpan } from "../../../src/tracing.js";
import { type WorkflowHarness, team, workflowHarness } from "../jobs/workflow-harness.js";
import { type TestTracing, installTestTracing } from "../../support/tracing.js";

let harness: WorkflowHarness | undefined;
let tracing: TestTracing | undefined;
afterEach(async () => {
  await harness?.close();
  await tracing?.uninstall();
  harness = undefined;
  tracing = undefined;
});

describe("team run spans", () => {
  it("puts the run, its jobs and its agents in the starter's trace", async () => {
    tracing = installTestTracing();
    harness = await workflowHarness({ respond: (call) => ({ text: `${call.role} done` }) });
    const pipeline = team({ name: "Relay", mode: "pipeline", agents: [{ id: "first", task: "start" }, { id: "second", task: "finish" }] });
    const run = await inSpan("execute_tool workflow_run", {}, () => harness!.engine.start({ team: pipeline, goal: "ship it", sessionKey: "web:team-chat" }));
    expect((await harness.ended(run.id)).status).toBe("completed");
    await tracing.ended("invoke_agent second");

    const starter = tracing.named("execute_tool workflow_run")[0]!.spanContext();
    const [teamRun] = tracing.named("team_run Relay");
    expect(teamRun!.parentSpanContext?.spanId).toBe(starter.spanId);
    expect(teamRun!.attributes).toMatchObject({ "countbot.team": "Relay", "countbot.team_run": run.id, "countbot.team_mode": "pipeline", "countbot.nodes": 2 });
    const jobs = tracing.named("process workflows");
    const agents = ["first", "second"].map((id) => tracing!.named(`invoke_agent ${id}`)[0]!);
    for (const span of [teamRun!, ...jobs, ...agents]) expect(span.spanContext().traceId).toBe(starter.traceId);
    expect(jobs.map((job) => job.parentSpanContext?.spanId)).toContain(teamRun!.spanContext().spanId);
    for (const agent of agents) {
      expect(jobs.map((job) => job.spanContext().spanId)).toContain(agent.parentSpanContext?.spanId);
      expect(agent.attributes).toMatchObject({ "gen_ai.operation.name": "invoke_agent", "countbot.team_run": run.id });
    }
    expect(agents[0]!.attributes["gen_ai.agent.name"]).toBe("first");
  });
});
