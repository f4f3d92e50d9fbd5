/**
 * `npm run bench [-- name ...]`: the benchmarks, figures as ratios measured in one run.
 * Names: loop, bus, scale, memory. No name: all of them.
 */
import { benchAgentLoop } from "./agent-loop.js";
import { benchBus } from "./bus.js";

const benches: Record<string, () => Promise<void>> = {
  loop: benchAgentLoop,
  bus: benchBus,
};

const chosen = process.argv.slice(2);
for (const name of chosen.length > 0 ? chosen : Object.keys(benches)) {
  const bench = benches[name];
  if (!bench) {
    console.error(`unknown bench "${name}"; choose from: ${Object.keys(benches).join(", ")}`);
    process.exit(2);
  }
  await bench();
}
