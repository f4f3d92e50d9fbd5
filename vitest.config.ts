import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    // Generous: e2e tests start real processes, which take seconds on 2 busy cores.
    testTimeout: 90_000,
    hookTimeout: 90_000,
    pool: "forks",
    // Two cores here: keep parallel files modest so process-spawning e2e tests stay stable.
    maxWorkers: 2,
  },
});
