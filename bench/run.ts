/**
 * `npm run bench`: every benchmark, figures as ratios measured in one run.
 * `npm run bench -- scale memory`: only the named ones, in that order.
 */
import { benchAgentLoop } from "./agent-loop.js";
import { benchBus } from "./bus.js";
import { benchMemory } from "./memory.js";
import { benchMemoryStore } from "./memory-store.js";
import { benchQuotas } from "./quotas.js";
import { benchRuntime } from "./runtime.js";
import { benchScale } from "./scale.js";
import { benchSoak } from "./soak.js";
import { benchStartMemory } from "./start-memory.js";
import { benchTeams } from "./teams.js";
import { benchTurnMemory } from "./turn-memory.js";

/** Name → benchmark; the default runs them all in this order. */
const benches: Record<string, () => Promise<void>> = {
  loop: benchAgentLoop,
  bus: benchBus,
  scale: benchScale,
  soak: benchSoak,
  memory: benchMemory,
  "memory-store": benchMemoryStore,
  "start-memory": benchStartMemory,
  teams: benchTeams,
  quotas: benchQuotas,
  "turn-memory": benchTurnMemory,
  runtime: benchRuntime,
};

const requested = process.argv.slice(2);
const unknown = requested.filter((name) => !(name in benches));
if (unknown.length > 0) {
  console.error(`unknown bench: ${unknown.join(", ")} (known: ${Object.keys(benches).join(", ")})`);
  process.exit(2);
}
for (const name of requested.length > 0 ? requested : Object.keys(benches)) {
  await benches[name]!();
}
